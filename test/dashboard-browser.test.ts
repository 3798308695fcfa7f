import { createPublicClient, createWalletClient, encodeFunctionData, http } from 'viem'
import { foundry } from 'viem/chains'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Gateway } from '../src/app.js'
import { attributionSuffix } from '../src/attribution/index.js'
import { registryAbi } from '../src/attribution/registry.js'
import { type Anvil, startAnvil } from '../src/devnet/anvil.js'
import { REGISTRY_DEPLOY_BYTECODE } from '../src/devnet/registry-contract.js'
import { CHROMIUM_PATH, hasChromium, keepScreenshot, launchChromium, warnIfNoChromium } from './fixtures/browser.js'
import { createTestDatabase, type TestDatabase } from './fixtures/db.js'
import { DEV_ACCOUNTS } from './fixtures/flashblocks.js'
import { startTestGateway } from './fixtures/gateway.js'
import { waitForSameHead } from './fixtures/sync.js'

const TRANSACTIONS = 3

warnIfNoChromium('dashboard browser test')

type Box = { left: number; right: number; top: number; bottom: number; height: number; text: string }

/** The chart's text labels as laid out on screen. */
function chartLabels(page: Page, selector: string): Promise<Box[]> {
  return page.$$eval(selector, (labels) =>
    labels.map((label) => {
      const box = label.getBoundingClientRect()
      return { left: box.left, right: box.right, top: box.top, bottom: box.bottom, height: box.height, text: label.textContent ?? '' }
    }),
  )
}

function overlapping(boxes: Box[]): [string, string][] {
  const found: [string, string][] = []
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i]!, boxes[j]!]
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) found.push([a.text, b.text])
    }
  return found
}

describe.skipIf(!hasChromium)(`the dashboard in a real Chromium${hasChromium ? '' : ` (skipped: no ${CHROMIUM_PATH})`}`, () => {
  let anvil: Anvil
  let database: TestDatabase
  let gateway: Gateway
  let browser: Browser
  let code: string

  /** A fresh page at `width` px, recording page errors, console errors, and every request it makes. */
  async function open(width: number) {
    const page = await browser.newPage({ viewport: { width, height: 900 } })
    const record = { page, errors: [] as string[], consoleErrors: [] as string[], requests: [] as string[], foreign: [] as string[] }
    page.on('pageerror', (error) => record.errors.push(error.message))
    page.on('console', (message) => {
      if (message.type() === 'error') record.consoleErrors.push(message.text())
    })
    page.on('request', (request) => {
      record.requests.push(request.url())
      if (!request.url().startsWith(gateway.url)) record.foreign.push(request.url())
    })
    await page.goto(`${gateway.url}/dashboard`)
    return record
  }

  async function lookUp(page: Page, input: string) {
    await page.fill('#code-input', input)
    await page.click('button[type=submit]')
  }

  const waitForFigures = (page: Page) =>
    page.waitForFunction((wanted) => document.querySelector('#stat-confirmed')?.textContent === wanted, String(TRANSACTIONS), { timeout: 10_000 })

  beforeAll(async () => {
    anvil = await startAnvil()
    database = await createTestDatabase()
    // An on-chain builder-codes registry (the devnet's), where the code is registered once it is given.
    const operator = createWalletClient({ account: DEV_ACCOUNTS[0]!, chain: foundry, transport: http(anvil.rpcUrl) })
    const client = createPublicClient({ chain: foundry, transport: http(anvil.rpcUrl) })
    const registry = (await client.waitForTransactionReceipt({ hash: await operator.deployContract({ abi: registryAbi, bytecode: REGISTRY_DEPLOY_BYTECODE }) }))
      .contractAddress!
    gateway = await startTestGateway({ upstreamRpc: anvil.rpcUrl, databaseUrl: database.databaseUrl, builderCodeRegistry: registry })
    const account = DEV_ACCOUNTS[1]!
    const response = await fetch(`${gateway.url}/v1/agents/builder-codes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ walletAddress: account.address }),
    })
    code = ((await response.json()) as { builderCode: string }).builderCode
    await client.waitForTransactionReceipt({
      hash: await operator.sendTransaction({
        to: registry,
        data: encodeFunctionData({ abi: registryAbi, functionName: 'register', args: [code, account.address, DEV_ACCOUNTS[2]!.address] }),
      }),
    })
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
    const { page, errors, consoleErrors, foreign } = await open(1100)
    await page.selectOption('#interval', 'minute')
    await lookUp(page, code)
    await waitForFigures(page)
    expect(await page.textContent('#stat-code')).toBe(code)
    expect(await page.textContent('#stat-registered')).toBe('registered')
    expect(await page.textContent('#stat-reach')).toBe('1')
    expect(await page.textContent('#stat-value')).toBe('0.003')
    expect(await page.textContent('#stat-pending')).toBe('0')
    expect(await page.textContent('#stat-roles')).toBe(`code ${TRANSACTIONS}`)
    // The on-chain registry's word: registered, with its owner and payout address.
    expect(await page.textContent('#stat-on-chain')).toBe('on chain')
    expect(await page.textContent('#stat-on-chain-detail')).toMatch(
      new RegExp(`^Registered on chain in block \\d+ \\(\\d{4}-.*\\); owner ${DEV_ACCOUNTS[1]!.address}, payout ${DEV_ACCOUNTS[2]!.address}\\.$`),
    )
    // The chart: one bar per minute, and the bars add up to the transactions.
    const bars = await page.$$eval('#chart svg rect.bar', (rects) => rects.map((rect) => Number(rect.getAttribute('data-transactions'))))
    expect(bars).toHaveLength(60)
    expect(bars.reduce((sum, count) => sum + count, 0)).toBe(TRANSACTIONS)
    // The leaderboard lists the code.
    await page.waitForFunction((wanted) => document.querySelector('#leaderboard')?.textContent?.includes(wanted), code)
    expect(await page.$eval('#leaderboard tr', (row) => row.querySelector('.chain-note')?.textContent)).toBe('on chain')
    await keepScreenshot(page, 'dashboard.png')

    // A wallet works as well as a code.
    await lookUp(page, DEV_ACCOUNTS[1]!.address)
    await page.waitForFunction((wanted) => location.hash.length > 1 && document.querySelector('#stat-code')?.textContent === wanted, code)
    expect(errors).toEqual([])
    expect(consoleErrors).toEqual([])
    expect(foreign).toEqual([])
    await page.close()
  })

  test('by default the interval is chosen from the data, so that the bars span the chart rather than sit at its edge', async () => {
    const { page, errors, requests } = await open(1100)
    expect(await page.inputValue('#interval')).toBe('auto')
    await lookUp(page, code)
    await waitForFigures(page)
    // Three transactions sent within seconds on a fresh devnet: minutes, not a 60-hour axis.
    const statsRequests = requests.filter((url) => url.includes('/stats?'))
    expect(statsRequests.at(-1)).toMatch(/interval=minute&points=[12]$/)
    const bars = await page.$$eval('#chart svg rect.bar', (rects) =>
      rects.map((rect) => ({
        transactions: Number(rect.getAttribute('data-transactions')),
        x: Number(rect.getAttribute('x')),
        width: Number(rect.getAttribute('width')),
      })),
    )
    expect(bars.length).toBeLessThanOrEqual(2)
    expect(bars.reduce((sum, bar) => sum + bar.transactions, 0)).toBe(TRANSACTIONS)
    // The first bucket holds the first transaction and the last one the newest: the data spans the axis.
    expect(bars[0]!.transactions).toBeGreaterThan(0)
    expect(bars.at(-1)!.transactions).toBeGreaterThan(0)
    // …and the bars sit in the middle of the plot (a wide one is capped, not stretched over the whole width).
    const plot = await page.$eval('#chart svg', (element) => (element as SVGSVGElement).viewBox.baseVal.width)
    const middle = (bars[0]!.x + bars.at(-1)!.x + bars.at(-1)!.width) / 2
    expect(Math.abs(middle - plot / 2)).toBeLessThan(plot * 0.05)
    expect(await page.textContent('#chart-caption')).toContain('per minute')
    await keepScreenshot(page, 'dashboard-auto-interval.png')
    expect(errors).toEqual([])
    await page.close()
  })

  test('a code active over hours or weeks gets hours or days, as many as its span', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
    const now = 1_760_000_000
    const asked: string[] = []
    for (const [span, wanted] of [
      [5 * 3_600, /interval=hour&points=6$/],
      [20 * 86_400, /interval=day&points=2[01]$/],
      [30 * 60, /interval=minute&points=3[01]$/],
    ] as const) {
      await page.unroute('**/stats?*')
      // The gateway's answer for a code first seen `span` seconds before the head, as it would bucket it.
      await page.route('**/stats?*', (route) => {
        const url = new URL(route.request().url())
        asked.push(url.search)
        const bucket = { minute: 60, hour: 3_600, day: 86_400 }[url.searchParams.get('interval') as 'minute']
        const points = Number(url.searchParams.get('points'))
        const last = Math.floor(now / bucket) * bucket
        const series = Array.from({ length: points }, (_, index) => ({
          timestamp: last - (points - 1 - index) * bucket,
          transactions: 1,
          reach: 1,
          gasUsed: '1',
        }))
        const figures = { transactions: points, reach: 1, contracts: 1, gasUsed: '1', suffixGas: '1', value: '0', firstSeen: now - span, lastSeen: now }
        const empty = { ...figures, transactions: 0, firstSeen: null, lastSeen: null }
        const body = {
          builderCode: 'bc_mocked00',
          registered: true,
          walletAddress: null,
          head: 1,
          confirmed: figures,
          pending: empty,
          series: { interval: url.searchParams.get('interval'), bucketSeconds: bucket, points: series },
        }
        return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(body) })
      })
      if (page.url() === 'about:blank') await page.goto(`${gateway.url}/dashboard`)
      asked.length = 0
      await lookUp(page, 'bc_mocked00')
      await page.waitForFunction(() => document.querySelector('#chart-caption')?.textContent?.includes('chosen from the data'))
      expect(asked.at(-1)).toMatch(wanted)
    }
    await page.close()
  })

  test('an unknown code is asked for once, clears the previous figures and says so', async () => {
    const { page, errors, consoleErrors, requests } = await open(1100)
    await lookUp(page, code)
    await waitForFigures(page)
    const unknown = 'bc_nobody00'
    const before = consoleErrors.length
    await lookUp(page, unknown)
    await page.waitForFunction(() => document.querySelector('#error')?.textContent?.includes('unknown builder code'))
    expect(await page.textContent('#error')).toContain(unknown)
    expect(await page.isHidden('#stats')).toBe(true)
    expect(await page.textContent('#stat-confirmed')).not.toBe(String(TRANSACTIONS))
    expect(await page.textContent('#stat-code')).toBe('')
    expect(await page.$$('#chart svg')).toHaveLength(0)
    // Three polling periods later: still the one request, and the previous code is no longer polled either.
    const asked = () => requests.filter((url) => url.includes(`/v1/builder-codes/${unknown}/stats`)).length
    const previous = requests.filter((url) => url.includes(`/v1/builder-codes/${code}/stats`)).length
    await page.waitForTimeout(3_500)
    expect(asked()).toBe(1)
    expect(requests.filter((url) => url.includes(`/v1/builder-codes/${code}/stats`)).length).toBe(previous)
    expect(await page.textContent('#error')).toContain('unknown builder code')
    // The only console line is Chromium's own note of the one 404 response; the page logs nothing.
    const after = consoleErrors.slice(before)
    expect(after.length).toBeLessThanOrEqual(1)
    for (const line of after) expect(line).toMatch(/Failed to load resource: the server responded with a status of 404/)
    await keepScreenshot(page, 'dashboard-unknown-code.png')

    // A known code afterwards polls again.
    await lookUp(page, code)
    await waitForFigures(page)
    expect(errors).toEqual([])
    await page.close()
  })

  test('0x1234 and other 0x inputs that are not 20-byte addresses are bad addresses, refused before any request', async () => {
    const { page, errors, requests } = await open(1100)
    await lookUp(page, code)
    await waitForFigures(page)
    for (const input of ['0x1234', `0x${'ab'.repeat(21)}`, `0x${'zz'.repeat(20)}`, '0X12']) {
      const sent = requests.length
      await lookUp(page, input)
      await page.waitForFunction(() => document.querySelector('#error')?.textContent?.startsWith('bad address'))
      expect(await page.textContent('#error')).toContain(input)
      expect(await page.textContent('#error')).not.toContain('unknown builder code')
      expect(await page.isHidden('#stats')).toBe(true)
      await page.waitForTimeout(300)
      // Nothing about the input was asked (the leaderboard keeps refreshing on its own; a poll of the code shown
      // before may have been on its way as the input was entered: that it stops is checked below).
      expect(requests.slice(sent).filter((url) => !url.includes('/v1/builder-codes?limit=') && !url.includes(`/v1/builder-codes/${code}/`))).toEqual([])
    }
    // The code shown before is no longer polled: nothing about it over two of the page's polling intervals (1 s).
    const settled = requests.length
    await page.waitForTimeout(2_500)
    expect(requests.slice(settled).filter((url) => url.includes(`/v1/builder-codes/${code}/`))).toEqual([])
    await keepScreenshot(page, 'dashboard-bad-address.png')
    expect(errors).toEqual([])
    await page.close()
  })

  for (const width of [390, 1280])
    test(`at ${width} px nothing overflows the page and the chart's labels neither overlap nor shrink`, async () => {
      const { page, errors } = await open(width)
      for (const interval of ['minute', 'auto']) {
        await page.selectOption('#interval', interval)
        await lookUp(page, code)
        await waitForFigures(page)
        await page.waitForFunction((wanted) => document.querySelectorAll('#chart rect.bar').length === wanted || wanted === 0, interval === 'minute' ? 60 : 0)
        await page.waitForFunction((wanted) => document.querySelector('#leaderboard')?.textContent?.includes(wanted), code)
        // Measured once the figures are on screen with the chart and every label laid out. Twice in CI (loaded
        // machine, 1280 px, a full-page screenshot just before) a label came back with an all-zero box, as if not
        // rendered, beside a laid-out chart.
        await page.waitForFunction(() => {
          const chart = document.querySelector('#chart svg')?.getBoundingClientRect()
          const labels = [...document.querySelectorAll('#chart text')].map((label) => label.getBoundingClientRect())
          return (
            !(document.querySelector('#stats') as HTMLElement).hidden &&
            chart !== undefined &&
            chart.width > 0 &&
            labels.length > 0 &&
            labels.every((box) => box.right > 0 && box.bottom > 0)
          )
        })
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
        const xLabels = await chartLabels(page, '#chart text.x-label')
        const yLabels = await chartLabels(page, '#chart text.y-label')
        expect(xLabels.length).toBeGreaterThanOrEqual(1)
        if (interval === 'minute') expect(xLabels.length).toBeGreaterThanOrEqual(2)
        expect(overlapping([...xLabels, ...yLabels])).toEqual([])
        // Drawn in the page's pixels: 11 px text stays about 11 px tall, however narrow the screen.
        // What the page showed, should a label come out flat: whether the figures were hidden, the chart's box, the error line.
        const state = await page.evaluate(() => ({
          statsHidden: (document.querySelector('#stats') as HTMLElement).hidden,
          chart: document.querySelector('#chart svg')?.getBoundingClientRect().toJSON(),
          error: document.querySelector('#error')?.textContent,
        }))
        for (const label of [...xLabels, ...yLabels]) expect(label.height, JSON.stringify({ label, state })).toBeGreaterThanOrEqual(10)
        const chart = await page.$eval('#chart svg', (element) => element.getBoundingClientRect().right)
        expect(chart).toBeLessThanOrEqual(width)
        // After the measurements: a full-page screenshot resizes the viewport for a moment, and the page redraws.
        await keepScreenshot(page, `dashboard-${width}px-${interval}.png`)
      }
      // Resizing redraws the chart for the new width, still without overlaps.
      await page.setViewportSize({ width: width === 390 ? 1280 : 390, height: 900 })
      await page.waitForTimeout(200)
      expect(overlapping(await chartLabels(page, '#chart text'))).toEqual([])
      expect(errors).toEqual([])
      await page.close()
    })

  test('the leaderboard shows the figure it ranks by: confirmed plus pending, the pending part noted (and fits 390 px)', async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } })
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    // Pending transactions need a Flashblocks feed; the leaderboard's answer is given here as the gateway would rank it.
    const builderCodes = [
      { builderCode: 'bc_ahead000', registered: true, transactions: 585, pendingTransactions: 2, reach: 40, gasUsed: '12345678901', lastSeen: 1_700_000_000 },
      { builderCode: 'bc_behind00', registered: true, transactions: 586, pendingTransactions: 0, reach: 41, gasUsed: '12345678902', lastSeen: 1_700_000_000 },
      {
        builderCode: 'x'.repeat(32),
        registered: false,
        transactions: 0,
        pendingTransactions: 1_234,
        reach: 1_234,
        gasUsed: '123456789012345678',
        lastSeen: null,
      },
    ].sort((a, b) => b.transactions + b.pendingTransactions - (a.transactions + a.pendingTransactions))
    await page.route('**/v1/builder-codes?limit=*', (route) =>
      route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ builderCodes }) }),
    )
    await page.goto(`${gateway.url}/dashboard`)
    await page.waitForFunction(() => document.querySelectorAll('#leaderboard tr').length === 3)
    const rows = await page.$$eval('#leaderboard tr', (trs) =>
      trs.map((tr) => ({
        code: tr.querySelector('a')?.textContent,
        total: tr.querySelector('td.transactions')?.firstChild?.textContent,
        note: tr.querySelector('td.transactions .pending-note')?.textContent ?? null,
      })),
    )
    expect(rows).toEqual([
      { code: 'x'.repeat(32), total: '1,234', note: '1,234 pending' },
      { code: 'bc_ahead000', total: '587', note: '2 pending' },
      { code: 'bc_behind00', total: '586', note: null },
    ])
    const shown = rows.map((row) => Number(row.total!.replaceAll(',', '')))
    expect(shown).toEqual([...shown].sort((a, b) => b - a))
    await keepScreenshot(page, 'dashboard-leaderboard-390px.png')
    // The table fits: no scrolling inside its box, none of the page.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    expect(await page.$eval('.table-wrap', (wrap) => wrap.scrollWidth <= wrap.clientWidth)).toBe(true)
    expect(errors).toEqual([])
    await page.close()
  })
})
