/** One page of a listing, and how many items the whole listing has. */
export interface Page<T> {
  total: number;
  page: number;
  size: number;
  items: T[];
}

/** Rows skipped before page `page` (1-based) of `size` rows: the listings' OFFSET. */
export function pageOffset(page: number, size: number): number {
  return (page - 1) * size;
}
