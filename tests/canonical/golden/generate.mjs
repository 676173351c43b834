// How tests/canonical/golden/*.json were produced (run once with Node 20; the files are never
// edited afterwards, a new encoding is a new scheme). This is an independent implementation:
// ECMAScript's own JSON.stringify for strings and numbers, Array.prototype.sort (UTF-16 code
// units) for keys, String.prototype.toWellFormed for lone surrogates, node:crypto for H.
//   node tests/canonical/golden/generate.mjs
import { createHash, createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";

function jcs(value) {
  if (value === null || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error("not a JSON number");
    return JSON.stringify(value);
  }
  if (typeof value === "string") return JSON.stringify(value.toWellFormed());
  if (Array.isArray(value)) return "[" + value.map(jcs).join(",") + "]";
  const keys = Object.keys(value).map((k) => [k.toWellFormed(), k]);
  keys.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return "{" + keys.map(([w, k]) => JSON.stringify(w) + ":" + jcs(value[k])).join(",") + "}";
}

const hex = (s) => Buffer.from(s, "utf8").toString("hex");

// Inputs are JSON texts as a Python test reads them with json.loads: integers stay exact there and
// become doubles here, which is the rule under test; \ud800 escapes give lone surrogates in both.
const inputs = [
  "null", "true", "false", "0", "-0", "-0.0", "1", "-1", "100.0", "1.5", "0.1", "1e16", "1e-7",
  "1e21", "1e20", "123456789012345680000", "1.5e300", "5e-324", "1.7976931348623157e308",
  "0.000001", "0.0000025", "0.00001", "1e-5", "2.5e-5", "1e15", "999999999999999900000",
  "9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
  "18446744073709551616", "295147905179352825856", "333333333.33333329", "1E30", "4.50", "2e-3",
  "0.000000000000000000000000001", "[]", "{}", "[[],{}]",
  '""', '"a"', '"\\u0000\\u001f\\u007f\\u0080"', '"\\b\\f\\n\\r\\t\\"\\\\/"', '"\\u2028\\u2029"',
  '"é€😀"', '"\\ud800"', '"a\\udc00b"', '"\\ud83d\\ude00"', '"\\ude00\\ud83d"',
  '{"b":1,"a":2}', '{"b":1,"10":2,"2":3,"😀":4,"\\uffff":5}',
  '{"\\ue000":1,"😀":2,"\\uffff":3,"\\ud7ff":4}',
  '{"a":{"d":1.0,"c":null},"b":[true,false,null,1e16]}',
  '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
  '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
  '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
  '{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}',
];
const vectors = inputs.map((input) => ({ input, jcs_hex: hex(jcs(JSON.parse(input))) }));
writeFileSync(
  new URL("./jcs-vectors.json", import.meta.url),
  JSON.stringify({ generator: "generate.mjs (Node " + process.version + ")", vectors }, null, 1) + "\n",
);

// RFC 8785 Appendix B style: IEEE-754 bit patterns and what ECMAScript writes for them.
const bits = [
  "0000000000000000", "8000000000000000", "0000000000000001", "8000000000000001",
  "7fefffffffffffff", "ffefffffffffffff", "4340000000000000", "c340000000000000",
  "4430000000000000", "44b52d02c7e14af5", "44b52d02c7e14af6", "44b52d02c7e14af7",
  "444b1ae4d6e2ef4e", "444b1ae4d6e2ef4f", "444b1ae4d6e2ef50", "3eb0c6f7a0b5ed8c",
  "3eb0c6f7a0b5ed8d", "41b3de4355555553", "41b3de4355555554", "41b3de4355555555",
  "41b3de4355555556", "41b3de4355555557", "becbf647612f3696", "43143ff3c1cb0959",
  "3ff0000000000000", "4059000000000000", "3fb999999999999a", "3ee4f8b588e368f1",
  "3ed4f8b588e368f1", "3ec4f8b588e368f1", "4341c37937e08000", "444b1ae4d6e2ef51",
];
const numbers = bits.map((h) => {
  const x = Buffer.from(h, "hex").readDoubleBE(0);
  return { ieee_hex: h, jcs: JSON.stringify(x) };
});
writeFileSync(
  new URL("./numbers.json", import.meta.url),
  JSON.stringify({ generator: "generate.mjs (Node " + process.version + ")", numbers }, null, 1) + "\n",
);

// H(salt, text) and its keyed form, with node:crypto.
const H = (salt, text, key) => {
  const data = Buffer.concat([Buffer.from(salt.toWellFormed(), "utf8"), Buffer.from([0x1f]), Buffer.from(text.toWellFormed(), "utf8")]);
  const mac = key === null ? createHash("sha256") : createHmac("sha256", Buffer.from(key, "hex"));
  return mac.update(data).digest("hex").slice(0, 16);
};
const cases = [
  ["run-1", "hello", null], ["run-1", "", null], ["run-a", "You are a helpful assistant.", null],
  ["run-b", "You are a helpful assistant.", null], ["run-1", "π ≈ 3.14159 — 🐛", null],
  ["r", "SYSTEM_MARKER you are a bot", null], ["run-1", "\u001f<unserializable>", null],
  ["run-1", "agentfootprint.transform.chain.v1", null], ["run-1", "af.messages.v1", null],
  ["run-1", '{"messages":[{"content":"hi","role":"user"}],"model":"m"}', null],
  ["run-1", "user\u001ehi\u001e\u001e\u001e\u001e", null], ["run-1", "a\ud800b", null],
  ["run-\udc00", "x", null], ["ünïcode-run", "text", null],
  ["run-1", "hello", "6b6579"], ["run-1", "hello", "00"], ["run-a", "You are a helpful assistant.", "736563726574"],
  ["run-1", "", "736563726574"], ["run-1", "af.messages.v1", "0123456789abcdef0123456789abcdef"],
];
const hashes = cases.map(([salt, text, key]) => ({ salt, text, key_hex: key, h: H(salt, text, key) }));
writeFileSync(
  new URL("./receipt-hash.json", import.meta.url),
  JSON.stringify({ generator: "generate.mjs (Node " + process.version + ")", hashes }, null, 1) + "\n",
);
