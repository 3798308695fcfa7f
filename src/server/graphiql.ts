import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { GraphiQLOptions } from 'graphql-yoga'
import { compressStatic, type ContentCoding, negotiateEncoding } from '../http/compress.js'
import { etagMatches } from '../http/etag.js'

/** Where GraphiQL's scripts, styles and workers are served, each under a name holding its content hash. */
export const GRAPHIQL_ASSETS_PATH = '/graphql/assets/'
/** A hashed name never changes content: browsers keep it a year without asking again. */
const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable'
/** A tiny SVG instead of the library's default favicon (a 150 KB data URI inlined in every page). */
const FAVICON = `data:image/svg+xml,${encodeURIComponent('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><path d="M9 0 2 9h5l-1 7 7-9H8z" fill="#0052ff"/></svg>')}`
const JAVASCRIPT = 'application/javascript; charset=utf-8'

type Asset = { path: string; contentType: string; body: Buffer; etag: string; encoded: Partial<Record<ContentCoding, Promise<Buffer>>> }

function asset(name: string, extension: string, contentType: string, text: string): Asset {
  const body = Buffer.from(text)
  const hash = createHash('sha256').update(body).digest('base64url').slice(0, 16)
  return { path: `${GRAPHIQL_ASSETS_PATH}${name}.${hash}.${extension}`, contentType, body, etag: `W/"${hash}"`, encoded: {} }
}

type Assets = { script: Asset; style: Asset; workers: Record<string, Asset>; byPath: Map<string, Asset> }

let built: Promise<Assets> | null = null

/**
 * The library's bundle split into files, hashed once per process on first use. The bundle is imported then,
 * not when the server starts: its module holds ~28 MB of strings in the heap (its 9 MB of source, kept by V8,
 * and the text it exports), which a process that never shows GraphiQL (every worker behind a load
 * balancer but the one a developer's browser reaches) would carry for nothing.
 */
function graphiqlAssets(): Promise<Assets> {
  built ??= import('@graphql-yoga/render-graphiql/graphiql').then(
    ({ css, editorWorkerService, graphqlWorker, js, jsonWorker }) => {
      const script = asset('graphiql', 'js', JAVASCRIPT, js)
      const style = asset('graphiql', 'css', 'text/css; charset=utf-8', css)
      // Monaco asks for its workers by label; the library makes Blob URLs of them, we serve them as files.
      const workers = {
        editorWorkerService: asset('editor.worker', 'js', JAVASCRIPT, editorWorkerService),
        json: asset('json.worker', 'js', JAVASCRIPT, jsonWorker),
        graphql: asset('graphql.worker', 'js', JAVASCRIPT, graphqlWorker),
      }
      const byPath = new Map([script, style, ...Object.values(workers)].map((entry) => [entry.path, entry]))
      return { script, style, workers, byPath }
    },
    (error: unknown) => {
      // The next request tries again rather than failing for the life of the process.
      built = null
      throw error
    },
  )
  return built
}

/** JSON for inside a `<script>`: no `</script>` or `<!--` can end it early. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replaceAll('<', '\\u003c')
}

function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;')
}

/**
 * GraphiQL's page as @graphql-yoga/render-graphiql renders it, minus the 9 MB it inlines: the bundle, styles
 * and Monaco workers are linked as cacheable files, so the page itself is a couple of kilobytes.
 */
export async function renderGraphiqlPage(options?: GraphiQLOptions): Promise<string> {
  const { script, style, workers } = await graphiqlAssets()
  const workerUrls = Object.fromEntries(Object.entries(workers).map(([label, entry]) => [label, entry.path]))
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(options?.title ?? 'GraphiQL')}</title>
    <link rel="icon" href="${escapeHtml(options?.favicon ?? FAVICON)}" />
    <link rel="stylesheet" href="${style.path}" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run this app.</noscript>
    <div id="root"></div>
    <script>
      const workers = ${scriptJson(workerUrls)};
      self['MonacoEnvironment'] = { globalAPI: false, getWorkerUrl: (moduleId, label) => workers[label] };
    </script>
    <script src="${script.path}"></script>
    <script>
      YogaGraphiQL.renderYogaGraphiQL(window.document.querySelector('#root'), ${scriptJson(options ?? {})});
    </script>
  </body>
</html>
`
}

/**
 * Serves one of GraphiQL's files: immutable, with a weak `ETag` (304 on `If-None-Match`), compressed once per
 * coding and kept. Returns `false` when the path names no asset.
 */
export async function serveGraphiqlAsset(request: IncomingMessage, response: ServerResponse, path: string): Promise<boolean> {
  const entry = (await graphiqlAssets()).byPath.get(path)
  if (entry === undefined) return false
  const headers = { 'content-type': entry.contentType, 'cache-control': IMMUTABLE_CACHE_CONTROL, etag: entry.etag, vary: 'Accept-Encoding' }
  if (etagMatches(request.headers['if-none-match'], entry.etag)) {
    response.writeHead(304, headers)
    response.end()
    return true
  }
  const coding = negotiateEncoding(request.headers['accept-encoding'])
  const body = coding === null ? entry.body : await (entry.encoded[coding] ??= compressStatic(entry.body, coding))
  response.writeHead(200, { ...headers, 'content-length': body.length, ...(coding !== null && { 'content-encoding': coding }) })
  response.end(request.method === 'HEAD' ? undefined : body)
  return true
}
