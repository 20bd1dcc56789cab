/** One page of a listing, and how many items the whole listing has. */
export interface Page<T> {
  total: number;
  page: number;
  size: number;
  items: T[];
}
