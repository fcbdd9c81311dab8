import { describe, expect, it } from 'vitest'
import { BytesBlob } from '../../../src/store/pglite-worker.js'

describe('BytesBlob (the bytes PGlite takes as a Blob, in its thread)', () => {
  const text = 'id\tname\n1\tcafé ☕\n'
  const bytes = () => new TextEncoder().encode(text).buffer

  it('answers arrayBuffer() with the bytes themselves, not a copy', async () => {
    const own = bytes()
    const blob = new BytesBlob(own)
    expect(blob).toBeInstanceOf(Blob)
    expect(await blob.arrayBuffer()).toBe(own)
    expect(blob.size).toBe(own.byteLength)
  })

  it('is the same bytes read any other way a Blob is read', async () => {
    const blob = new BytesBlob(bytes())
    expect(await blob.text()).toBe(text)
    expect(await blob.slice(3, 7).text()).toBe('name')
    const chunks: Uint8Array[] = []
    for await (const chunk of blob.stream()) chunks.push(chunk)
    expect(new TextDecoder().decode(Buffer.concat(chunks))).toBe(text)
    expect(await new Response(blob).text()).toBe(text)
  })
})
