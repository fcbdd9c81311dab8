import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

function markdownUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? markdownUnder(path) : name.endsWith('.md') ? [path] : []
  })
}

/** Relative link targets of a Markdown file (inline links and images), code spans and blocks left out. */
function relativeLinks(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '')
  return [...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith('#'))
}

/** GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped, spaces → -, repeats numbered). */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const [, heading] of text.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading!.replace(/`/g, '').toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

describe('documentation links', () => {
  const files = [join(ROOT, 'README.md'), join(ROOT, 'src/query/README.md'), ...markdownUnder(join(ROOT, 'docs'))]

  it('finds the documents', () => {
    expect(files.map((f) => relative(ROOT, f))).toEqual(expect.arrayContaining(['README.md', 'docs/api.md', 'docs/contract.md', 'docs/spec/inventory-api-v1.md']))
  })

  it('resolves every relative link of README.md and docs/ to a file of the repository', () => {
    const broken: string[] = []
    for (const file of files) {
      for (const target of relativeLinks(readFileSync(file, 'utf8'))) {
        const path = resolve(dirname(file), decodeURIComponent(target.split('#')[0]!))
        if (!path.startsWith(`${ROOT}/`) || !existsSync(path)) broken.push(`${relative(ROOT, file)} → ${target}`)
        // A link into a section names one of its headings.
        const anchor = target.split('#')[1]
        if (anchor !== undefined && path.endsWith('.md') && existsSync(path) && !anchorsOf(readFileSync(path, 'utf8')).has(decodeURIComponent(anchor))) {
          broken.push(`${relative(ROOT, file)} → ${target} (no such heading)`)
        }
      }
    }
    expect(broken).toEqual([])
  })

  it('reads links as links: README names docs in the repository, none outside it', () => {
    const readme = relativeLinks(readFileSync(join(ROOT, 'README.md'), 'utf8'))
    expect(readme.length).toBeGreaterThan(10)
    expect(readme).toEqual(expect.arrayContaining(['docs/api.md', 'docs/contract.md', 'docs/spec/inventory-api-v1.md']))
    expect(relativeLinks('[a](../shared/CONTRACT.md) `[b](x.md)` [c](https://example.com) [d](#top)')).toEqual(['../shared/CONTRACT.md'])
  })
})
