/**
 * A bare loop over the real-work blocks in one thread: `bun bare.mjs DIR PART PARTS` runs the
 * blocks whose C-order number is PART modulo PARTS, in C order; `bun bare.mjs DIR make` makes
 * the arrays.
 */

import { GRID, makeArrays, openArrays, runBlock } from "./kernel.mjs";

const [folder, part, parts] = process.argv.slice(2);
if (part === "make") {
  await makeArrays(folder);
} else {
  const arrays = await openArrays(folder);
  let number = 0;
  for (let z = 0; z < GRID; z++) {
    for (let y = 0; y < GRID; y++) {
      for (let x = 0; x < GRID; x++) {
        if (number % Number(parts) === Number(part)) await runBlock(arrays, [z, y, x]);
        number++;
      }
    }
  }
}
