/**
 * `run --force TASK[:OFFSET:SHAPE]`: blocks that run whatever the ledger says (done, fresh,
 * quarantined): every block of TASK, or those whose write ROI meets the box.
 */

import type { TaskLayout } from "../blocks/mod.ts";
import { InputError } from "../errors.ts";
import type { PipelineConfig } from "../pipeline/spec.ts";

interface Box {
  readonly offset: readonly number[];
  readonly shape: readonly number[];
}

export class ForcedBlocks {
  /** Per task: null (nothing forced), "all", or boxes. */
  readonly #boxes: (Box[] | "all" | null)[];
  readonly #layouts: readonly TaskLayout[];

  private constructor(boxes: (Box[] | "all" | null)[], layouts: readonly TaskLayout[]) {
    this.#boxes = boxes;
    this.#layouts = layouts;
  }

  static none(pipeline: PipelineConfig, layouts: readonly TaskLayout[]): ForcedBlocks {
    return new ForcedBlocks(pipeline.tasks.map(() => null), layouts);
  }

  /** Parse the values of --force; refuses an unknown task or a malformed box, naming it. */
  static parse(
    values: readonly string[],
    pipeline: PipelineConfig,
    layouts: readonly TaskLayout[],
  ): ForcedBlocks {
    const boxes: (Box[] | "all" | null)[] = pipeline.tasks.map(() => null);
    const ids = pipeline.tasks.map((t) => t.id);
    for (const value of values) {
      const [id, offset, shape, ...rest] = value.split(":");
      const t = ids.indexOf(id ?? "");
      if (t < 0) {
        throw new InputError(
          `--force ${JSON.stringify(value)}: there is no task "${id}"; tasks: ${
            ids.join(", ")
          }. Write --force TASK or --force TASK:OFFSET:SHAPE (e.g. seg:0,0,0:64,64,64).`,
        );
      }
      if (offset === undefined) {
        boxes[t] = "all";
        continue;
      }
      const dims = layouts[t]!.dims;
      const numbers = (s: string | undefined) =>
        s === undefined || s === "" ? null : s.split(",").map(Number);
      const o = numbers(offset);
      const sh = numbers(shape);
      if (
        rest.length > 0 || o === null || sh === null || o.length !== dims || sh.length !== dims ||
        !o.every(Number.isInteger) || !sh.every((x) => Number.isInteger(x) && x > 0)
      ) {
        throw new InputError(
          `--force ${
            JSON.stringify(value)
          }: the box must be OFFSET:SHAPE with ${dims} integers each (shape > 0), e.g. ${id}:${
            new Array(dims).fill(0).join(",")
          }:${new Array(dims).fill(64).join(",")}.`,
        );
      }
      const total = layouts[t]!.totalWriteRoi;
      const overlaps = o.every((start, d) =>
        start < total.offset[d]! + total.shape[d]! && total.offset[d]! < start + sh[d]!
      );
      if (!overlaps) {
        throw new InputError(
          `--force ${
            JSON.stringify(value)
          }: the box intersects no block of task "${id}", whose blocks cover ${
            total.offset.join(",")
          }:${
            total.shape.join(",")
          }; give a box that overlaps them, or --force ${id} for every block.`,
        );
      }
      const list = boxes[t];
      if (list !== "all") boxes[t] = [...(list ?? []), { offset: o, shape: sh }];
    }
    return new ForcedBlocks(boxes, layouts);
  }

  any(task: number): boolean {
    return this.#boxes[task] !== null;
  }

  /** Whether the block must run regardless. */
  has(task: number, position: number): boolean {
    const boxes = this.#boxes[task];
    if (boxes === null || boxes === undefined) return false;
    if (boxes === "all") return true;
    const write = this.#layouts[task]!.writeRoiOf(position);
    return boxes.some((b) =>
      b.offset.every((o, d) =>
        o < write.offset[d]! + write.shape[d]! && write.offset[d]! < o + b.shape[d]!
      )
    );
  }
}
