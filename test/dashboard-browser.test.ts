import { createWalletClient, http } from 'viem'
import { foundry } from 'viem/chains'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { CHROMIUM_PATH, hasChromium, keepScreenshot, launchChromium, warnIfNoChromium } from './fixtures/browser.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { startTestGateway } from './fixtures/gateway.js'
import { waitForSameHead } from './fixtures/sync.js'

const TRANSACTIONS = 3

warnIfNoChromium('dashboard browser test')

describe.skipIf(!hasChromium)(`the dashboard in a real Chromium${hasChromium ? '' : ` (skipped: no ${CHROMIUM_PATH})`}`, () => {
  let anvil: Anvil
  let database: TestDatabase
  let gateway: Gateway
  let browser: Browser
  let code: string

  beforeAll(async () => {
    anvil = await startAnvil()
    database = await createTestDatabase()
    gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl })
    const account = DEV_ACCOUNTS[1]!
    const response = await fetch(`${gateway.url}/v1/agents/builder-codes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ walletAddress: account.address }),
    })
    code = ((await response.json()) as { builderCode: string }).builderCode
    const wallet = createWalletClient({ account, chain: foundry, transport: http(anvil.rpcUrl) })
    for (let sent = 0; sent < TRANSACTIONS; sent++)
      await wallet.sendTransaction({ to: `0x${'42'.repeat(20)}`, value: 1_000_000_000_000_000n, dataSuffix: attributionSuffix([code]) })
    await waitForSameHead(gateway, anvil.rpcUrl)
    browser = await launchChromium()
  })

  afterAll(async () => {
    await browser?.close()
    await gateway?.stop()
    await anvil?.stop()
    await database?.drop()
  })

  test('entering a code shows its numbers and a chart, with no request leaving the gateway', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
    const foreign: string[] = []
    page.on('request', (request) => {
      if (!request.url().startsWith(gateway.url)) foreign.push(request.url())
    })
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(`${gateway.url}/dashboard`)
    await page.fill('#code-input', code)
    await page.selectOption('#interval', 'minute')
    await page.click('button[type=submit]')
    await page.waitForFunction(() => document.querySelector('#stat-confirmed')?.textContent === '3', undefined, { timeout: 10_000 })
    expect(await page.textContent('#stat-code')).toBe(code)
    expect(await page.textContent('#stat-registered')).toBe('registered')
    expect(await page.textContent('#stat-reach')).toBe('1')
    expect(await page.textContent('#stat-value')).toBe('0.003')
    expect(await page.textContent('#stat-pending')).toBe('0')
    // The chart: one bar per minute, and the bars add up to the transactions.
    const bars = await page.$$eval('#chart svg rect.bar', (rects) => rects.map((rect) => Number(rect.getAttribute('height'))))
    expect(bars).toHaveLength(60)
    expect(bars.filter((height) => height > 0).length).toBeGreaterThan(0)
    // The leaderboard lists the code.
    await page.waitForFunction((wanted) => document.querySelector('#leaderboard')?.textContent?.includes(wanted), code)
    await keepScreenshot(page, 'dashboard.png')

    // A wallet works as well as a code.
    await page.fill('#code-input', DEV_ACCOUNTS[1]!.address)
    await page.click('button[type=submit]')
    await page.waitForFunction((wanted) => location.hash.length > 1 && document.querySelector('#stat-code')?.textContent === wanted, code)
    expect(errors).toEqual([])
    expect(foreign).toEqual([])
  })
})
