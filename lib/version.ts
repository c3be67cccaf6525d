/** The blockwise release; `--version` prints it. Keep in step with package.json. */
export const VERSION = "0.1.0";
