import { describe, expect, it } from "vitest";
import { QUOTA_FIELDS, formToQuota, quotaFieldProblem, quotaToForm } from "./quota";

const quota = {
  max_apps: 20,
  max_components: 20,
  max_versions: 100,
  max_artifact_bytes: 64 << 20,
  max_total_artifact_bytes: 1 << 30,
  shares: { max_instances: 50, request_deadline_ms: 3000 },
};

describe("quota form", () => {
  it("round-trips, empty shares staying the node's default", () => {
    const form = quotaToForm(quota);
    expect(form["shares.max_instances"]).toBe("50");
    expect(form["shares.max_sessions"]).toBe("");
    expect(formToQuota(form)).toEqual(quota);
  });

  it("refuses what the API would", () => {
    const apps = QUOTA_FIELDS.find((f) => f.key === "max_apps")!;
    const share = QUOTA_FIELDS.find((f) => f.key === "shares.max_sessions")!;
    expect(quotaFieldProblem(apps, "")).toBe("a value is needed");
    expect(quotaFieldProblem(share, "")).toBeNull();
    expect(quotaFieldProblem(apps, "0")).toBe("at least 1");
    expect(quotaFieldProblem(apps, "1.5")).toBe("a whole number");
    expect(quotaFieldProblem(apps, "-3")).toBe("a whole number");
    expect(quotaFieldProblem(apps, "99999999999999999999")).toBe("too large");
    expect(quotaFieldProblem(apps, " 7 ")).toBeNull();
    const field = (key: string) => QUOTA_FIELDS.find((f) => f.key === key)!;
    expect(quotaFieldProblem(field("shares.kv_store_bytes"), "4095")).toBe("at least 4096");
    expect(quotaFieldProblem(field("shares.kv_store_bytes"), "4096")).toBeNull();
    expect(quotaFieldProblem(field("shares.max_open_files"), "1048577")).toBe("at most 1048576");
    expect(quotaFieldProblem(field("shares.sqlite_statements"), "0")).toBe("at least 1");
  });
});
