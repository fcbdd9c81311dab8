/** Whether `err` is an error of reading a file or stream (opening it included). */
export function isReadError(err: unknown): err is NodeJS.ErrnoException {
  const { code, syscall } = err as NodeJS.ErrnoException
  return code !== undefined && (syscall === 'read' || syscall === 'open')
}
