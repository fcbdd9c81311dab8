import { rename, rm } from 'node:fs/promises'
import path from 'node:path'

/**
 * Writes `file` whole or not at all (`kbis backup` here, `kbis export --output` too: the lowest
 * layer both reach): `write` fills a temporary file beside it
 * (`.<name>.<pid>.partial`, on the same file system), which is renamed to `file` once `write`
 * completes and removed if it fails. A reader of `file` (a scheduled job, a restore) never sees
 * a shorter file that looks complete, and a failed attempt leaves an older `file` as it was.
 */
export async function writeWhole<T>(file: string, write: (partial: string) => Promise<T>): Promise<T> {
  const partial = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.partial`)
  try {
    const result = await write(partial)
    await rename(partial, file)
    return result
  } finally {
    await rm(partial, { force: true })
  }
}
