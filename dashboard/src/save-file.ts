/**
 * Hands a file the page made or fetched to the browser's download, named `name`: through a Blob URL, so that an
 * authenticated download (the token is in a header, never in a URL) saves like a link would.
 */
export function saveFile(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  // Revoked later, not at once: some browsers read the URL after click() returns.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
