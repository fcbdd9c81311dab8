import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import ts from 'typescript'

/** Type-checks each program against the generated client; returns the diagnostics per file. */
export async function typeCheck(dir: string, programs: Record<string, string>): Promise<Record<string, string[]>> {
  for (const [name, text] of Object.entries(programs)) await writeFile(join(dir, name), text)
  const files = Object.keys(programs).map((name) => join(dir, name))
  const program = ts.createProgram(files, {
    strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler, skipLibCheck: true, types: [],
  })
  const out: Record<string, string[]> = Object.fromEntries(Object.keys(programs).map((name) => [name, []]))
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const name = d.file ? d.file.fileName.slice(dir.length + 1) : '(global)'
    ;(out[name] ??= []).push(ts.flattenDiagnosticMessageText(d.messageText, '\n'))
  }
  return out
}
