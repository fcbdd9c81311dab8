import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

/**
 * Issue 10: folders of src/ import downwards only. Reads every relative import (type imports and
 * re-exports included) and lists each pair of folders that import each other.
 */
const SRC = path.resolve('src')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name)
    return statSync(file).isDirectory() ? sourceFiles(file) : file.endsWith('.ts') ? [file] : []
  })
}

/** `assets` for src/assets/sql.ts; null for a file at the top of src/ (app.ts, server.ts). */
function folderOf(file: string): string | null {
  const parts = path.relative(SRC, file).split(path.sep)
  return parts.length > 1 ? parts[0]! : null
}

function folderImports(): Map<string, Map<string, string[]>> {
  const edges = new Map<string, Map<string, string[]>>()
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file)
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(/(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]/g)) {
      const to = folderOf(path.resolve(path.dirname(file), spec!))
      if (from === null || to === null || from === to) continue
      const byTarget = edges.get(from) ?? new Map<string, string[]>()
      edges.set(from, byTarget)
      byTarget.set(to, [...(byTarget.get(to) ?? []), `${path.relative(SRC, file)} → ${spec}`])
    }
  }
  return edges
}

describe('the folders of src/', () => {
  it('import each other in one direction only (no cycle of two folders, type imports included)', () => {
    const edges = folderImports()
    expect(edges.size).toBeGreaterThan(10)
    const cycles: string[] = []
    for (const [a, targets] of edges) {
      for (const [b, why] of targets) {
        const back = edges.get(b)?.get(a)
        if (back && a < b) cycles.push(`${a} ↔ ${b}: ${why[0]}; ${back[0]}`)
      }
    }
    expect(cycles).toEqual([])
  })

  it('have no longer cycle either (a → b → … → a)', () => {
    const edges = folderImports()
    const cycles: string[] = []
    const state = new Map<string, 'open' | 'done'>()
    const visit = (folder: string, trail: string[]): void => {
      if (state.get(folder) === 'done') return
      if (state.get(folder) === 'open') return void cycles.push([...trail.slice(trail.indexOf(folder)), folder].join(' → '))
      state.set(folder, 'open')
      for (const next of edges.get(folder)?.keys() ?? []) visit(next, [...trail, folder])
      state.set(folder, 'done')
    }
    for (const folder of [...edges.keys()].sort()) visit(folder, [])
    expect(cycles).toEqual([])
  })

  it('keep the store at the bottom: store/ imports no other folder', () => {
    expect([...(folderImports().get('store')?.keys() ?? [])]).toEqual([])
  })
})

/**
 * The packages a module of src/ loads when it is imported: the bare specifiers of its static
 * imports, side-effect ones included (not `import type`, not `await import(…)`), followed through
 * the relative ones.
 */
function packagesLoadedBy(entry: string): Set<string> {
  const packages = new Set<string>()
  const seen = new Set<string>()
  const visit = (file: string): void => {
    if (seen.has(file)) return
    seen.add(file)
    const text = readFileSync(file, 'utf8')
    for (const [, spec] of text.matchAll(/^(?:import|export)\s+(?!type\b)(?:[^'";]*?from\s+)?['"]([^'"]+)['"]/gm)) {
      if (spec!.startsWith('.')) visit(path.resolve(path.dirname(file), spec!.replace(/\.js$/, '.ts')))
      else if (!spec!.startsWith('node:')) packages.add(spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!)
    }
  }
  visit(path.join(SRC, entry))
  return packages
}

describe('the CLI', () => {
  it('loads no store driver, PGlite, web framework or Redis client until a command needs it (kbis import, export and --help use none)', () => {
    const packages = packagesLoadedBy('cli/main.ts')
    expect(packages).toContain('commander')
    for (const heavy of ['pg', '@electric-sql/pglite', 'fastify', 'ioredis']) expect(packages).not.toContain(heavy)
  })
})
