/**
 * A file system error as one says it to a user: `EISDIR: illegal operation on a directory`
 * from Node's `EISDIR: illegal operation on a directory, read` (the system call and the path,
 * often a temporary one, left out: the caller names the file).
 */
export function fsReason(err: Error): string {
  const { code, syscall } = err as NodeJS.ErrnoException
  if (code === undefined || syscall === undefined) return err.message
  return err.message.split(`, ${syscall}`)[0]!
}

/** Whether `err` is an error of reading a file or stream (opening it included). */
export function isReadError(err: unknown): err is NodeJS.ErrnoException {
  const { code, syscall } = err as NodeJS.ErrnoException
  return code !== undefined && (syscall === 'read' || syscall === 'open')
}
