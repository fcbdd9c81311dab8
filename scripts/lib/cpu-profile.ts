/** A V8 CPU profile (`Profiler.stop` of node:inspector, or a .cpuprofile file). */
export interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]
  samples: number[]
  timeDeltas: number[]
}

/**
 * The functions with the most self time, most first: `   123 ms  12.3 %  parseRow pg/lib/result.js:62`
 * (paths shortened to the package, or to src/ and bench/), one line each.
 */
export function selfTimeLines(profile: Profile, top: number): string[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<string, number>()
  let total = 0
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!.callFrame
    const name = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench)\//, '$1/')}:${frame.lineNumber}`
    self.set(name, (self.get(name) ?? 0) + profile.timeDeltas[i]!)
    total += profile.timeDeltas[i]!
  })
  return [...self].sort((a, b) => b[1] - a[1]).slice(0, top)
    .map(([name, us]) => `${(us / 1000).toFixed(0).padStart(6)} ms ${((100 * us) / total).toFixed(1).padStart(5)} %  ${name}`)
}
