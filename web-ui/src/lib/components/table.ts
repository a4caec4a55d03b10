/** A column of a DataTable. */
export interface Column<R> {
  id: string;
  header: string;
  /** The value shown (unless the table's `cell` renders it) and sorted by. */
  value: (row: R) => string | number | null;
  sortable?: boolean;
  numeric?: boolean;
}
