/**
 * The Content-Security-Policy of the pages the platform serves itself (the dashboard, the API reference): scripts,
 * styles and connections from this origin only, no inline code, no frames, nothing from another host, so that
 * they work on an isolated network and a page cannot be made to talk elsewhere.
 */
export const SAME_ORIGIN_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // Swagger UI's stylesheet draws its icons as data: SVGs; a data: URL is no request to anywhere.
  "img-src 'self' data:",
  // 'self' covers the stream's wss:// on this host and port.
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');
