// Turning a preview (host/edge-control: POST .../sites/{site}/preview)
// into what the page shows: highlighted segments, the rule an error is
// about and where in its pattern, and a line diff.
import { diffLines } from "diff";
import { ApiError } from "./api/client";

export interface Span {
  rule: number;
  /** UTF-16 offsets in the input. */
  input: [number, number];
  /** UTF-16 offsets in the output. */
  output: [number, number];
}

export interface Segment {
  text: string;
  /** The rule that wrote it, or null for unchanged text. */
  rule: number | null;
}

/** `text` cut at the spans' `side` ranges (ascending, not overlapping). */
export function segments(text: string, spans: Span[], side: "input" | "output"): Segment[] {
  const out: Segment[] = [];
  let at = 0;
  for (const s of spans) {
    const [from, to] = s[side];
    if (from < at || to > text.length || from > to) break; // not ours: stop highlighting
    if (from > at) out.push({ text: text.slice(at, from), rule: null });
    out.push({ text: text.slice(from, to), rule: s.rule });
    at = to;
  }
  if (at < text.length) out.push({ text: text.slice(at), rule: null });
  return out;
}

export interface RuleProblem {
  /** Index of the rule (from 0). */
  index: number;
  /** The rule's field: pattern, replacement or flags. */
  field: string;
  message: string;
  /** Character index in the pattern the engine points at, if it does. */
  at: number | null;
}

/**
 * The rule an API error is about (`rules[2].pattern`), and where: the
 * engine says `at byte N` of the pattern, which becomes a character index.
 */
export function ruleProblem(e: unknown, patterns: string[]): RuleProblem | null {
  if (!(e instanceof ApiError) || !e.field) return null;
  const m = /^rules\[(\d+)\]\.(\w+)$/.exec(e.field);
  if (!m) return null;
  const index = Number(m[1]);
  const field = m[2]!;
  const byte = /at byte (\d+)/.exec(e.message);
  const pattern = patterns[index];
  const at = byte && pattern !== undefined ? charIndexOfByte(pattern, Number(byte[1])) : null;
  // The API's message starts "rule N: ..." (numbered from 1): the table shows the row.
  return { index, field, message: e.message.replace(/^rule \d+: /, ""), at };
}

/** The index of the character holding UTF-8 byte `byte` of `s`. */
export function charIndexOfByte(s: string, byte: number): number {
  const enc = new TextEncoder();
  let bytes = 0;
  let i = 0;
  for (const ch of s) {
    const n = enc.encode(ch).length;
    if (bytes + n > byte) return i;
    bytes += n;
    i += ch.length;
  }
  return s.length;
}

export interface DiffLine {
  kind: "same" | "added" | "removed";
  text: string;
}

/** A line diff of input and output, unchanged runs longer than `context` lines folded. */
export function lineDiff(input: string, output: string, context = 2): (DiffLine | { kind: "fold"; lines: number })[] {
  const lines: DiffLine[] = [];
  for (const part of diffLines(input, output)) {
    const kind = part.added ? "added" : part.removed ? "removed" : "same";
    for (const text of part.value.replace(/\n$/, "").split("\n")) lines.push({ kind, text });
  }
  const out: (DiffLine | { kind: "fold"; lines: number })[] = [];
  const changed = lines.map((l) => l.kind !== "same");
  const near = (i: number) => {
    for (let d = -context; d <= context; d++) if (changed[i + d]) return true;
    return false;
  };
  let folded = 0;
  lines.forEach((l, i) => {
    if (near(i)) {
      if (folded) out.push({ kind: "fold", lines: folded });
      folded = 0;
      out.push(l);
    } else folded++;
  });
  if (folded) out.push({ kind: "fold", lines: folded });
  return out;
}
