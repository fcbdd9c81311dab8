import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
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
})
