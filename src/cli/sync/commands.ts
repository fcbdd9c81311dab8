import { Command, Option } from 'commander'

const out = (line: string) => process.stdout.write(`${line}\n`)

function serverOptions(command: Command): Command {
  return command
    .option('--url <url>', 'server base URL, e.g. http://127.0.0.1:8080 (env KBIS_URL)')
    .option('--key <key>', 'API key (env KBIS_API_KEY)')
}

/** `kbis import` and `kbis export` (CONTRACT §16): clients of a running server over HTTP. */
export function registerSyncCommands(program: Command): void {
  serverOptions(program
    .command('import')
    .description('Import assets of one type from a CSV or NDJSON file into a running server, in chunks of 10,000')
    .argument('<file>', 'file.csv (header = property keys, name, access_domain_key), file.ndjson, or - for standard input')
    .requiredOption('--type <asset type>', 'asset type of every row')
    .addOption(new Option('--format <format>', "the file's format (default: by its extension; CSV for -)").choices(['csv', 'ndjson']))
    .option('--upsert', 'create or update, naming each asset by its unique-key column (PUT /bulk/assets)')
    .option('--dry-run', 'check the whole file and write nothing')
    .option('--errors <out.csv>', 'write every refused row as CSV: line,field,message'))
    .action(async (file: string, flags: { type: string; format?: 'csv' | 'ndjson'; upsert?: boolean; dryRun?: boolean; errors?: string; url?: string; key?: string }) => {
      // Loaded by the command that runs (a CSV parser, a progress bar), not by every command (cli/main.ts).
      const [{ ServerClient }, { rowCount, runImport }] = await Promise.all([import('./client.js'), import('./import.js')])
      const summary = await runImport(new ServerClient(flags), { file, format: flags.format, type: flags.type, upsert: !!flags.upsert, dryRun: !!flags.dryRun, errors: flags.errors })
      const r = summary.results
      const done = flags.dryRun ? 'dry run, nothing written' : flags.upsert ? `${r.created} created, ${r.updated} updated, ${r.unchanged} unchanged` : `${r.created} created`
      const lost = summary.lostChunks > 0 ? `; ${summary.lostChunks} chunk(s) written whose answer the server lost (an --upsert re-run reports their rows unchanged)` : ''
      out(`${rowCount(summary.rows)} read; ${summary.refused} refused; ${done}${summary.failedChunks > 0 ? `; ${summary.failedChunks} chunk(s) failed and wrote nothing` : ''}${lost}`)
      if (summary.failedChunks > 0 || summary.lostChunks > 0) process.exitCode = 1
    })

  serverOptions(program
    .command('export')
    .description('Export every visible asset of one type from a running server (GET /export/assets)')
    .requiredOption('--type <asset type>', 'asset type to export')
    .addOption(new Option('--format <format>', 'output format').choices(['csv', 'ndjson']).default('csv'))
    .option('--output <file>', 'write to this file instead of stdout'))
    .action(async (flags: { type: string; format: 'csv' | 'ndjson'; output?: string; url?: string; key?: string }) => {
      const [{ ServerClient }, { runExport }] = await Promise.all([import('./client.js'), import('./export.js')])
      await runExport(new ServerClient(flags), { type: flags.type, format: flags.format, output: flags.output })
    })
}
