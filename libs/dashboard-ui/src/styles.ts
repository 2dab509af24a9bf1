/** The page's styles, inline in its HTML so the first paint waits for no request. */
export const PAGE_STYLES = `
:root { font-family: system-ui, sans-serif; font-size: 14px; color: #1d232a; background: #f6f7f9; }
body { margin: 0; }
header { display: flex; align-items: baseline; gap: 1.5em; padding: 0.6em 1.2em; background: #1d232a; color: #f6f7f9; }
header h1 { font-size: 1.3em; margin: 0; }
header .status { margin: 0; opacity: 0.85; }
main { padding: 0.5em 1.2em 2em; display: grid; gap: 1.2em; }
section { background: #fff; border: 1px solid #d8dde3; border-radius: 6px; padding: 0.6em 1em 1em; }
h2 { font-size: 1.1em; margin: 0.3em 0 0.6em; }
h3 { font-size: 1em; margin: 0.8em 0 0.3em; }
table { border-collapse: collapse; width: 100%; }
th, td { white-space: nowrap; text-align: left; padding: 0.25em 0.6em; border-bottom: 1px solid #eceff2; font-variant-numeric: tabular-nums; }
th { font-weight: 600; color: #4a5561; }
.ok { color: #14722e; }
.degraded { color: #9a5b00; }
.down { color: #b3261e; }
.dot { display: inline-block; width: 0.7em; height: 0.7em; border-radius: 50%; margin-right: 0.4em; vertical-align: baseline; }
.dot.ok { background: #1f9d43; } .dot.degraded { background: #e09b1a; } .dot.down { background: #d93a2b; }
.problem { background: #fdecea; color: #7a1a12; border: 1px solid #f3b8b2; border-radius: 4px; padding: 0.4em 0.8em; }
.cells { display: grid; grid-template-columns: repeat(auto-fill, minmax(44em, 1fr)); gap: 1em; }
.cell { border: 1px solid #eceff2; border-radius: 4px; padding: 0.4em 0.8em; }
.over { color: #b3261e; font-weight: 600; }
form { display: flex; flex-wrap: wrap; gap: 0.8em; align-items: end; }
label { display: flex; flex-direction: column; gap: 0.2em; font-weight: 600; color: #4a5561; }
button, select, input { font: inherit; padding: 0.25em 0.6em; }
button { cursor: pointer; }
[role=dialog] { border: 2px solid #1d232a; border-radius: 6px; padding: 0.8em 1em; background: #fffbe6; }
.muted { color: #6b7682; }
code { font-size: 0.95em; }
`;
