// The part of autocannon's API the bench uses (the package ships no types).
declare module 'autocannon' {
  interface Options {
    url: string
    connections?: number
    duration?: number
    /** Seconds to wait for a response (autocannon's default: 10). */
    timeout?: number
    headers?: Record<string, string>
    requests?: { method?: string; body?: string; setupRequest?: (request: any) => any }[]
  }
  interface Histogram {
    average: number
    p99: number
    max: number
  }
  interface Result {
    requests: Histogram
    latency: Histogram
    non2xx: number
    errors: number
  }
  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
