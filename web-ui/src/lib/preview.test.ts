import { describe, expect, it } from "vitest";
import { ApiError } from "./api/client";
import { charIndexOfByte, lineDiff, ruleProblem, segments } from "./preview";

describe("preview", () => {
  it("cuts text at the spans", () => {
    // As the API answers for rules cat→dog!, é→e on "😀 cat é cat".
    const spans = [
      { rule: 0, input: [3, 6], output: [3, 7] },
      { rule: 1, input: [7, 8], output: [8, 9] },
    ] as { rule: number; input: [number, number]; output: [number, number] }[];
    expect(segments("😀 dog! e dog!", spans, "output")).toEqual([
      { text: "😀 ", rule: null },
      { text: "dog!", rule: 0 },
      { text: " ", rule: null },
      { text: "e", rule: 1 },
      { text: " dog!", rule: null },
    ]);
    expect(segments("😀 cat é cat", spans, "input").map((s) => s.text)).toEqual(["😀 ", "cat", " ", "é", " cat"]);
    expect(segments("", [], "output")).toEqual([]);
  });

  it("stops highlighting at a span that does not fit", () => {
    const bad = [{ rule: 0, input: [0, 1], output: [5, 99] }] as never;
    expect(segments("abc", bad, "output")).toEqual([{ text: "abc", rule: null }]);
  });

  it("places an engine error in its rule and pattern", () => {
    const e = new ApiError(422, 'rule 2: pattern "é(ab" is not supported: unclosed group at byte 2', "rules[1].pattern");
    expect(ruleProblem(e, ["x", "é(ab"])).toEqual({
      index: 1,
      field: "pattern",
      message: 'pattern "é(ab" is not supported: unclosed group at byte 2',
      at: 1,
    });
    expect(ruleProblem(new ApiError(400, "bad flag", "rules[0].flags"), ["x"])).toMatchObject({
      index: 0,
      field: "flags",
      at: null,
    });
    expect(ruleProblem(new ApiError(400, "no", "body"), [])).toBeNull();
    expect(ruleProblem(new Error("x"), [])).toBeNull();
  });

  it("maps UTF-8 byte offsets to string indexes", () => {
    expect(charIndexOfByte("abc", 1)).toBe(1);
    expect(charIndexOfByte("éa", 2)).toBe(1);
    expect(charIndexOfByte("😀a", 4)).toBe(2);
    expect(charIndexOfByte("ab", 9)).toBe(2);
  });

  it("diffs lines and folds what did not change", () => {
    const input = ["a", "b", "c", "d", "e", "f", "g"].join("\n");
    const output = ["a", "b", "c", "D", "e", "f", "g"].join("\n");
    expect(lineDiff(input, output, 1)).toEqual([
      { kind: "fold", lines: 2 },
      { kind: "same", text: "c" },
      { kind: "removed", text: "d" },
      { kind: "added", text: "D" },
      { kind: "same", text: "e" },
      { kind: "fold", lines: 2 },
    ]);
  });
});
