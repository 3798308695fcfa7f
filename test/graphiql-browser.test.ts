import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { generateChain } from './fixtures/chain.js'
import { CHROMIUM_PATH, hasChromium, keepScreenshot, launchChromium, warnIfNoChromium } from './fixtures/browser.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { startTestGateway } from './fixtures/gateway.js'

warnIfNoChromium('GraphiQL browser test')

describe.skipIf(!hasChromium)(`GraphiQL in a real Chromium${hasChromium ? '' : ` (skipped: no ${CHROMIUM_PATH})`}`, () => {
  let anvil: Anvil
  let database: TestDatabase
  let gateway: Gateway
  let browser: Browser
  let head: bigint

  beforeAll(async () => {
    anvil = await startAnvil()
    head = (await generateChain(anvil.rpcUrl, { seed: 21, blocks: 4, txPerBlock: [3, 5] })).headNumber
    database = await createTestDatabase()
    gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
    await gateway.ingester.waitForBlock(Number(head))
    browser = await launchChromium()
  })

  afterAll(async () => {
    await browser?.close()
    await gateway?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('/graphql opens GraphiQL with the default query, which runs and shows the newest block, with no request leaving the gateway', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
    // No network but the gateway: GraphiQL's scripts, styles and workers must all be served by it.
    const foreign: string[] = []
    await page.route('**/*', (route) => {
      const url = route.request().url()
      if (url.startsWith(gateway.url) || url.startsWith('blob:') || url.startsWith('data:')) return route.continue()
      foreign.push(url)
      return route.abort()
    })
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    // Bytes on the wire: every response's headers and (encoded) body, as Chromium received them.
    const measured: Promise<number | null>[] = []
    page.on('requestfinished', (request) => {
      measured.push(
        request.sizes().then(
          (sizes) => sizes.responseHeadersSize + sizes.responseBodySize,
          () => null,
        ),
      )
    })
    await page.goto(`${gateway.url}/graphql`)
    await page.waitForSelector('.graphiql-execute-button', { timeout: 20_000 })
    // The default query is in the editor.
    // Monaco renders spaces as no-break spaces.
    const text = (selector: string) => page.evaluate((css) => (document.querySelector(css)?.textContent ?? '').replaceAll('\u00a0', ' '), selector)
    await expect.poll(() => text('.graphiql-query-editor'), { timeout: 10_000 }).toContain('query Latest')
    await page.click('.graphiql-execute-button')
    await expect.poll(() => text('.graphiql-response'), { timeout: 15_000 }).toContain('"transactionCount"')
    const response = await text('.graphiql-response')
    expect(response).toContain(`"number": "${head}"`)
    // Monaco renders only the lines in view: the top of the answer, where errors would come first.
    expect(response).toMatch(/^\{\s*"data"/)
    expect(response).not.toContain('"errors"')
    await keepScreenshot(page, 'graphiql.png')
    const sizes = await Promise.all(measured)
    // Every response measured, or the total below would be an undercount that passes.
    expect(sizes.length).toBeGreaterThan(0)
    expect(sizes.filter((size) => size === null)).toEqual([])
    const wireBytes = sizes.reduce<number>((total, size) => total + size!, 0)
    console.log(`GraphiQL: ${wireBytes} bytes on the wire (page, scripts, styles, workers, introspection and the query)`)
    expect(foreign).toEqual([])
    expect(errors).toEqual([])
    // br or gzip and a small page: about a fifth of the library's 9 MB single page.
    expect(wireBytes).toBeLessThan(3_000_000)
    // …and GraphiQL really came: its scripts alone are hundreds of kilobytes even compressed.
    expect(wireBytes).toBeGreaterThan(100_000)
  })

  test("GraphiQL's files are cacheable: an ETag, a year's Cache-Control, 304 on If-None-Match; the page revalidates", async () => {
    const page = await fetch(`${gateway.url}/graphql`, { headers: { accept: 'text/html' } })
    const html = await page.text()
    expect(html.length).toBeLessThan(5_000)
    const pageTag = page.headers.get('etag')!
    expect(page.headers.get('cache-control')).toBe('no-cache')
    expect((await fetch(`${gateway.url}/graphql`, { headers: { accept: 'text/html', 'if-none-match': pageTag } })).status).toBe(304)
    const assets = [...html.matchAll(/\/graphql\/assets\/[\w.-]+/g)].map((match) => match[0])
    expect(assets.length).toBe(5)
    for (const path of assets) {
      const answer = await fetch(`${gateway.url}${path}`, { headers: { 'accept-encoding': 'br' } })
      expect(answer.status, path).toBe(200)
      expect(answer.headers.get('content-encoding')).toBe('br')
      expect(answer.headers.get('cache-control')).toContain('immutable')
      const tag = answer.headers.get('etag')!
      expect((await fetch(`${gateway.url}${path}`, { headers: { 'if-none-match': tag } })).status).toBe(304)
    }
  })
})
