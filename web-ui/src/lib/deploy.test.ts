import { describe, expect, it } from "vitest";
import { componentName, mainVersion, rolloutWeights, servingPercent, singleComponentSpec, uploadKind } from "./deploy";

const at = (versions: { version: number; percent: number }[]) => ({ seq: 1, versions, created_at: 0 });

describe("deploy plans", () => {
  it("names components like edge deploy", () => {
    expect(componentName("Echo.wasm")).toBe("echo");
    expect(componentName("my_app v2.wasm")).toBe("my-app-v2");
    expect(componentName("2fast.wasm")).toBe("fast");
    expect(componentName("___.wasm")).toBe("app");
    expect(componentName("site.tar.gz")).toBe("site");
  });

  it("tells components from Spin archives", () => {
    expect(uploadKind("a.wasm")).toBe("component");
    expect(uploadKind("a.TGZ")).toBe("spin-app");
    expect(uploadKind("a.tar.gz")).toBe("spin-app");
    expect(uploadKind("a.zip")).toBeNull();
  });

  it("makes a one-component version", () => {
    expect(singleComponentSpec("web", "sha256:00", "/...")).toEqual({
      components: { web: { digest: "sha256:00" } },
      routes: [{ route: "/...", component: "web" }],
    });
  });

  it("splits traffic with what serves", () => {
    expect(rolloutWeights(4, 10, at([{ version: 3, percent: 100 }]))).toEqual([
      { version: 4, percent: 10 },
      { version: 3, percent: 90 },
    ]);
    // Moving an ongoing rollout keeps the old side.
    expect(
      rolloutWeights(
        4,
        50,
        at([
          { version: 4, percent: 10 },
          { version: 3, percent: 90 },
        ]),
      ),
    ).toEqual([
      { version: 4, percent: 50 },
      { version: 3, percent: 50 },
    ]);
    expect(rolloutWeights(4, 100, at([{ version: 3, percent: 100 }]))).toEqual([{ version: 4, percent: 100 }]);
    // The first deployment takes everything.
    expect(rolloutWeights(1, 10, null)).toEqual([{ version: 1, percent: 100 }]);
    expect(() => rolloutWeights(1, 0, null)).toThrow(RangeError);
  });

  it("reads what serves", () => {
    const d = at([
      { version: 4, percent: 10 },
      { version: 3, percent: 90 },
    ]);
    expect(mainVersion(d)).toBe(3);
    expect(mainVersion(null)).toBeNull();
    expect(servingPercent(d, 4)).toBe(10);
    expect(servingPercent(d, 2)).toBe(0);
  });
});
