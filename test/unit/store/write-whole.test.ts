import { lstat, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { createReadStream } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { writeWhole } from '../../../src/store/write-whole.js'

describe('writeWhole', () => {
  let dir = ''
  afterEach(async () => rm(dir, { recursive: true, force: true }))

  it('removes the temporary files a killed process left for the same file, and keeps those of processes still running', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kbis-write-whole-'))
    const file = path.join(dir, 'kbis.tar.gz')
    // Above Linux's largest process id: no such process.
    const orphan = '.kbis.tar.gz.4194399.partial'
    const writing = `.kbis.tar.gz.${process.ppid}.partial`
    const other = '.other.tar.gz.4194399.partial'
    for (const name of [orphan, writing, other]) await writeFile(path.join(dir, name), 'half')
    await writeWhole(file, async (partial) => writeFile(partial, 'whole'))
    expect(await readFile(file, 'utf8')).toBe('whole')
    expect((await readdir(dir)).sort()).toEqual([writing, other, 'kbis.tar.gz'].sort())
  })

  it('follows a symbolic link, as a shell does: the file it names is replaced, the link stays', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kbis-write-whole-'))
    await writeFile(path.join(dir, 'target.csv'), 'old')
    await symlink('target.csv', path.join(dir, 'link.csv'))
    await writeWhole(path.join(dir, 'link.csv'), async (partial) => writeFile(partial, 'whole'))
    expect(await readlink(path.join(dir, 'link.csv'))).toBe('target.csv')
    expect(await readFile(path.join(dir, 'target.csv'), 'utf8')).toBe('whole')
    // A link to a file not there yet: the file is made where the link points.
    await symlink('later.csv', path.join(dir, 'ahead.csv'))
    await writeWhole(path.join(dir, 'ahead.csv'), async (partial) => writeFile(partial, 'first'))
    expect((await lstat(path.join(dir, 'ahead.csv'))).isSymbolicLink()).toBe(true)
    expect(await readFile(path.join(dir, 'later.csv'), 'utf8')).toBe('first')
    expect((await readdir(dir)).sort()).toEqual(['ahead.csv', 'later.csv', 'link.csv', 'target.csv'])
  })

  it('writes to a FIFO (or a device) as it is, rather than put a plain file in its place', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kbis-write-whole-'))
    const fifo = path.join(dir, 'pipe')
    execFileSync('mkfifo', [fifo])
    const reader = createReadStream(fifo, 'utf8')
    try {
      const read = new Promise<string>((resolve, reject) => {
        let text = ''
        reader.on('data', (chunk) => { text += chunk })
        reader.on('end', () => resolve(text))
        reader.on('error', reject)
      })
      await writeWhole(fifo, async (target) => writeFile(target, 'streamed'))
      expect(await read).toBe('streamed')
      expect((await lstat(fifo)).isFIFO()).toBe(true)
      expect(await readdir(dir)).toEqual(['pipe'])
    } finally {
      reader.destroy()
    }
  })

  it('writes to a pipe reached through links that name no file (/dev/stdout of a command piped into another)', () => {
    // /dev/stdout → /proc/self/fd/1 → "pipe:[…]", which realpath cannot follow: as in
    // `kbis export --output /dev/stdout | wc -l`, a process whose standard output is a shell's pipe.
    const module = path.resolve('src/store/write-whole.ts')
    const script = `import(${JSON.stringify(module)}).then((m) => m.writeWhole('/dev/stdout', (t) => require('node:fs/promises').writeFile(t, 'through the pipe')))`
    const out = execFileSync('sh', ['-c', `node --import tsx -e "$SCRIPT" | tr a-z A-Z`], { env: { ...process.env, SCRIPT: script }, encoding: 'utf8' })
    expect(out).toBe('THROUGH THE PIPE')
  })
})
