import { ApiError, errorFromBody } from './api.js';

/**
 * An artifact upload: the file as the request body (`application/octet-stream`), reporting the bytes sent as they
 * go. XMLHttpRequest rather than fetch: it reports upload progress, which fetch in Chromium does not for a plain
 * body, and it sends a File from disk without reading it into memory. Apart from api.ts because it needs the DOM,
 * which the API client's unit tests lack.
 */
export function uploadFile<T>(
  path: string,
  token: string,
  file: Blob,
  headers: Record<string, string>,
  onProgress: (sent: number) => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    xhr.withCredentials = false;
    xhr.setRequestHeader('authorization', `Bearer ${token}`);
    xhr.setRequestHeader('accept', 'application/json');
    xhr.setRequestHeader('content-type', 'application/octet-stream');
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onerror = () =>
      reject(new ApiError('The upload did not reach the platform; try again', 0, undefined, undefined));
    xhr.onload = () => {
      let body: unknown;
      try {
        body = xhr.responseText ? JSON.parse(xhr.responseText) : undefined;
      } catch {
        body = undefined;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve((body as { data?: T } | undefined)?.data as T);
        return;
      }
      reject(errorFromBody(xhr.status, xhr.statusText, body));
    };
    xhr.send(file);
  });
}
