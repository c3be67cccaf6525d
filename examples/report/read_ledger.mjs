// examples/report/read_ledger.mjs: read a task's ledger from `blockwise serve` over HTTP with
// zarrita, as any Zarr v3 reader can (docs/guide/seeing-a-run.md):
//
//   bun read_ledger.mjs http://127.0.0.1:8000/zarr/segment/
//
// The `done` array covers the tracking grid, which can be larger than the block grid (it is
// anchored at totalRoi, read context included); counting its ones counts the done blocks.
import * as zarr from "zarrita";
import { FetchStore } from "@zarrita/storage";

const url = process.argv[2];
if (url === undefined) {
  console.error(
    "usage: read_ledger.mjs URL (the zarr3:// source `blockwise serve` prints, without zarr3://)",
  );
  process.exit(2);
}
const root = zarr.root(new FetchStore(url));
const group = await zarr.open(root, { kind: "group" });
const layout = group.attrs.blockwise.layout;
const done = await zarr.get(await zarr.open(root.resolve("done"), { kind: "array" }));
const blocks = layout.block_grid_shape.reduce((a, b) => a * b, 1);
const finished = done.data.reduce((n, v) => n + v, 0);
console.log(
  `${group.attrs.blockwise.task_id}: ${finished} of ${blocks} blocks done ` +
    `(block grid ${layout.block_grid_shape.join("×")}, tracking grid ${done.shape.join("×")})`,
);
