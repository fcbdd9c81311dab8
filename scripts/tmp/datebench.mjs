import pg from 'pg'
const orig = pg.types.getTypeParser(1184)
const texts = Array.from({length: 1000}, (_, i) => `2026-11-24 22:${String(i%60).padStart(2,'0')}:01.${String(123456+i).slice(0,6)}+00`)
const ISO = Symbol('iso')
function fast1(t) {
  const n = t.length
  if (n >= 22 && t.charCodeAt(10) === 32 && t.endsWith('+00') && t.charCodeAt(4) === 45) {
    const d = new Date(`${t.slice(0, 10)}T${t.slice(11, n - 3)}Z`)
    d[ISO] = `${t.slice(0, 10)}T${t.slice(11, 19)}Z`
    return d
  }
  return orig(t)
}
function run(name, f) {
  let x = 0; const t0 = performance.now()
  for (let r = 0; r < 500; r++) for (const t of texts) { const d = f(t); x += d.getTime() & 1 }
  console.log(name, (performance.now() - t0).toFixed(0), 'ms per 500k', x)
}
const iso = (d) => d[ISO] ?? `${d.toISOString().slice(0, 19)}Z`
run('orig parse', orig); run('fast parse', fast1)
run('orig parse+iso', (t) => { const d = orig(t); d.s = `${d.toISOString().slice(0, 19)}Z`; return d })
run('fast parse+iso', (t) => { const d = fast1(t); d.s = iso(d); return d })
console.log(fast1(texts[5]).toISOString(), orig(texts[5]).toISOString(), iso(fast1(texts[5])))
