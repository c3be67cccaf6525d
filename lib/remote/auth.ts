/**
 * The shared secret and the HMAC handshake of remote workers: defined in lib/execute/auth.ts
 * (the worker relay, in lib/execute, checks the scheduler's proof; lib/remote is above it).
 */

export * from "../execute/auth.ts";
