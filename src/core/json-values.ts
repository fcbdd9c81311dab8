import type { Issue } from './errors.js'
import { escapePointer } from './json.js'

/**
 * What JSON can carry and the store cannot keep as sent: NUL characters and lone surrogates in
 * text, numbers past a 64-bit float's range or integers it cannot hold exactly, nesting deeper
 * than MAX_BODY_DEPTH. The server refuses such a body (core/http-input.ts); `kbis import` refuses
 * such an NDJSON line the same way, before sending it (cli/sync/rows.ts).
 */

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why a string cannot be stored as PostgreSQL text or jsonb, or null when it can. */
function badText(text: string): string | null {
  if (text.includes('\u0000')) return 'text must not contain NUL (U+0000) characters'
  if (LONE_SURROGATE.test(text)) return 'text must be valid Unicode: a lone surrogate escape (\\ud800–\\udfff without its pair) cannot be stored'
  return null
}

/** Deepest nesting of objects and arrays a body may have (the deepest legal body, a search filter of 10 groups, uses 22). */
export const MAX_BODY_DEPTH = 64

const TOO_DEEP = `the body is nested too deeply: at most ${MAX_BODY_DEPTH} levels of objects and arrays`

/**
 * The values of a parsed body that JSON can carry but the store cannot: NUL characters and lone
 * UTF-16 surrogates in keys or strings, and numbers too large for a 64-bit float (JSON.parse
 * reads `1e400` as Infinity, which would be written as null); nesting deeper than MAX_BODY_DEPTH;
 * and the numbers of `inexact`, the values JSON.parse read for integers it could not keep exactly
 * (inexactIntegers: their text). Returns the issues with their pointers, in document order: the
 * first one only unless `all` (a bulk body lists every failing item, CONTRACT §5). Iterative (an
 * explicit stack): a body nested 100,000 deep cannot overflow the call stack. `values` false
 * checks the depth only (and `inexact`).
 */
function findUnstorable(root: unknown, values: boolean, inexact: readonly string[] = [], all = false): Issue[] {
  const issues: Issue[] = []
  const rounded = new Map<number, string>()
  for (const text of inexact) if (!rounded.has(Number(text))) rounded.set(Number(text), text)
  // Pointers are built only for the value reported: ordinary bodies pay no string work per node.
  interface Node { value: unknown; key: string; parent: Node | null; depth: number }
  const pointerOf = (node: Node): string => {
    const tokens: string[] = []
    for (let n: Node | null = node; n && n.parent; n = n.parent) tokens.push(escapePointer(n.key))
    return tokens.length === 0 ? '' : `/${tokens.reverse().join('/')}`
  }
  const stack: Node[] = [{ value: root, key: '', parent: null, depth: 0 }]
  while (stack.length > 0) {
    const node = stack.pop()!
    const value = node.value
    let detail: string | null = null
    if (typeof value === 'string') {
      detail = values ? badText(value) : null
    } else if (typeof value === 'number') {
      const sent = rounded.get(value)
      if (values && !Number.isFinite(value)) detail = 'number out of range: it does not fit a 64-bit float'
      else if (sent !== undefined) detail = `the number ${sent} cannot be kept exactly: integers beyond ±9007199254740991 (2^53 − 1) lose digits in a 64-bit float; no number property can hold it (a text property takes it sent as a string)`
    } else if (value !== null && typeof value === 'object' && node.depth >= MAX_BODY_DEPTH) {
      detail = TOO_DEEP
    }
    if (detail !== null) {
      issues.push({ detail, pointer: pointerOf(node) })
      if (!all) return issues
      continue
    }
    if (value === null || typeof value !== 'object') continue
    const depth = node.depth + 1
    // Children are pushed last-first so that they are visited in document order.
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], key: String(i), parent: node, depth })
    } else {
      const entries = Object.entries(value)
      for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i]![1], key: entries[i]![0], parent: node, depth })
      if (values) {
        for (const [key] of entries) {
          const bad = badText(key)
          if (bad === null) continue
          issues.push({ detail: `a key: ${bad}`, pointer: `${pointerOf(node)}/${escapePointer(key)}` })
          if (!all) return issues
        }
      }
    }
  }
  return issues
}

/**
 * Whether `value` holds an object or array `levels` levels below it (the root object is level
 * 0), as findUnstorable's depth rule: without building a node per value (a 10,000-item bulk
 * allocated 26 MB there). Recursion stops at `levels`, so the stack stays as shallow as the limit.
 */
function nestedDeeperThan(value: unknown, levels: number): boolean {
  if (value === null || typeof value !== 'object') return false
  if (levels === 0) return true
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (nestedDeeperThan(value[i], levels - 1)) return true
    return false
  }
  for (const key in value) if (nestedDeeperThan((value as Record<string, unknown>)[key], levels - 1)) return true
  return false
}

// Only a raw body with one of these can hold an unstorable value: the escapes of NUL and of
// surrogates (raw UTF-8 cannot carry a lone surrogate), or a number that may pass 1.8e308 (an
// exponent of 2 digits or more, or a run of 100 digits: 1 and 215 zeros then e99 overflows).
// The walk itself decides; these only spare it on ordinary bodies. A number with an exponent is
// looked for where JSON puts a value (at the start, or after `[`, `:` or `,` and blanks): inside
// text, `1e23` is common (three UUIDs in ten hold it), and a bulk of ids would walk every time.
const SUSPECT = /\\u0000|\\u[dD][89a-fA-F]|(?:^|[[:,])[ \t\n\r]*-?\d+(?:\.\d+)?[eE][+-]?\d{2}/

const LONG_RUN = 100

const isDigit = (code: number): boolean => code >= 48 && code <= 57

/**
 * Whether `text` holds LONG_RUN digits in a row. Any such run covers one position in every
 * LONG_RUN, so only those are looked at, and a digit there is measured both ways: a 3 MB bulk
 * body in 0.6 ms, where the regular expression `\d{100}` took 9 ms.
 */
export function hasLongDigitRun(text: string, run = LONG_RUN): boolean {
  for (let i = run - 1; i < text.length; i += run) {
    if (!isDigit(text.charCodeAt(i))) continue
    let start = i
    let end = i
    while (start > 0 && isDigit(text.charCodeAt(start - 1))) start--
    while (end + 1 < text.length && isDigit(text.charCodeAt(end + 1))) end++
    if (end - start + 1 >= run) return true
    // A shorter run holding i ends before i + run: the next position starts afresh.
  }
  return false
}

// An integer written with 16 digits or more may exceed 2^53 (9007199254740992, 16 digits), past
// which a 64-bit float holds only some integers: JSON.parse rounds the others to the nearest one.
const INEXACT_RUN = 16

/**
 * The integer literals of the JSON text `text` (outside strings, without fraction or exponent)
 * that JSON.parse cannot keep exactly, `9007199254740993` read as `9007199254740992`: stored,
 * each would be another number than the one sent. Only called on a text with a run of
 * INEXACT_RUN digits (hasLongDigitRun), so ordinary bodies pay the probe alone.
 */
/**
 * The integer a number of 2^53 or more (all integers) is kept as: the value of its shortest
 * decimal form, which JSON.stringify writes and the store keeps as a numeric (`1.2e+25` is
 * 12000000000000000000000000, not the float's 12000000000000000905969664).
 */
function keptInteger(n: number): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e\+?(\d+))?$/.exec(String(n))!
  const fraction = m[3] ?? ''
  return BigInt(`${m[1]}${m[2]}${fraction}`) * 10n ** BigInt(Number(m[4] ?? 0) - fraction.length)
}

/**
 * Whether the integer literal `token` (digits, optional minus sign; finite as a float) would be
 * kept as another number: JSON.parse rounds it to a 64-bit float, and the store keeps that
 * float's shortest decimal form. `9007199254740993` becomes 9007199254740992 and
 * `12345678901234567891` 12345678901234567000: lost digits. `12000000000000000000000000` is kept
 * as written (it is `1.2e+25`, the form an export may give it back in), as is 2^60.
 */
export function losesDigits(token: string): boolean {
  return BigInt(token) !== keptInteger(Number(token))
}

export function inexactIntegers(text: string): string[] {
  const found: string[] = []
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // a backslash escapes the next character
      else if (c === 34) inString = false
      continue
    }
    if (c === 34) {
      inString = true
      continue
    }
    if (c !== 45 && !isDigit(c)) continue
    let end = i + 1
    while (end < text.length && /[0-9.eE+-]/.test(text[end]!)) end++
    const token = text.slice(i, end)
    i = end - 1
    // A number past a float's range (Infinity) is findUnstorable's to report.
    if (/^-?\d{16,}$/.test(token) && Number.isFinite(Number(token)) && losesDigits(token)) found.push(token)
  }
  return found
}

/**
 * The values of the JSON text `text`, parsed as `value`, that the store could not keep as sent,
 * with their pointers (the first only unless `all`). The depth is always checked (a walk that
 * allocates nothing); values only when the text looks suspect; integers past 2^53 only where 16
 * digits follow each other. The walk with pointers runs only to report what was found.
 */
export function unstorableValues(text: string, value: unknown, all = false): Issue[] {
  const suspect = SUSPECT.test(text) || hasLongDigitRun(text)
  const inexact = hasLongDigitRun(text, INEXACT_RUN) ? inexactIntegers(text) : []
  return suspect || inexact.length > 0 || nestedDeeperThan(value, MAX_BODY_DEPTH) ? findUnstorable(value, suspect, inexact, all) : []
}

/**
 * The same check of a value parsed from another text than JSON (a YAML set-up file): every value,
 * `inexact` naming the integer literals the parser read that lost digits as floats. The first
 * issue only.
 */
export function unstorableParsed(value: unknown, inexact: readonly string[] = []): Issue[] {
  return findUnstorable(value, true, inexact)
}
