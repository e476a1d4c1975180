window.mytorchWidgets = window.mytorchWidgets || {};

// The convolution visualizer: a single-channel 2-D convolution, one window at a time.
// `data` is what mytorch.widgets.ConvVisualizer builds (its chapter describes the layout):
//   {title, input: H rows of W numbers, kernel: kh rows of kw numbers,
//    cases: [{label, stride: [sh, sw], padding: [ph, pw], dilation: [dh, dw],
//             output: Ho rows of Wo numbers, columns: kh*kw rows of Ho*Wo numbers}]}
// `columns` is im2col's matrix: column l = p*Wo + q holds the window of output (p, q), its row
// k = i*kw + j the kernel tap (i, j); y = w · columns, with w the kernel read row by row.
// Everything lives inside `root`: no global ids, no shared state, so several can share a page.
mytorchWidgets.conv = function (root, data) {
  'use strict';

  function el(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) {                      // numbers in cells: short, no trailing zeros
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(3)));
  }

  // ---- styles, scoped to this widget's root class ---------------------------------------
  root.classList.add('mytorch-conv');
  el('style', {}, root, `
    .mytorch-conv { font: 13px/1.4 system-ui, sans-serif; color: #222; margin: 1em 0; }
    .mytorch-conv .mt-title { font-weight: 600; margin-bottom: .3em; }
    .mytorch-conv .mt-controls { display: flex; flex-wrap: wrap; gap: .4em .8em; align-items: center; margin-bottom: .6em; }
    .mytorch-conv .mt-controls input[type=range] { flex: 0 1 220px; }
    .mytorch-conv .mt-panels { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
    .mytorch-conv .mt-panel { display: flex; flex-direction: column; gap: .2em; }
    .mytorch-conv .mt-caption { font-size: 12px; color: #555; }
    .mytorch-conv .mt-grid { display: grid; gap: 2px; }
    .mytorch-conv .mt-cell { width: 26px; height: 22px; display: flex; align-items: center; justify-content: center;
                             font: 11px/1 ui-monospace, monospace; background: #eef2f7; border: 1px solid #d5dbe3;
                             border-radius: 2px; box-sizing: border-box; }
    .mytorch-conv .mt-cell.mt-pad { background: #fafafa; color: #aaa; border-style: dashed; }
    .mytorch-conv .mt-cell.mt-span { background: #fff4d6; }
    .mytorch-conv .mt-cell.highlight { background: #ffc94d; border-color: #b57b00; color: #000; }
    .mytorch-conv .mt-cell.mt-pad.highlight { background: #ffe7ad; color: #8a6d2b; }
    .mytorch-conv .mt-cell.mt-kernel { background: #dcebdc; border-color: #9cbf9c; }
    .mytorch-conv .mt-cell.mt-head { background: none; border: none; color: #777; }
    .mytorch-conv .mt-output .mt-cell, .mytorch-conv .mt-y { cursor: pointer; }
    .mytorch-conv .mt-matrix-wrap { position: relative; overflow-x: auto; max-width: 100%; padding-bottom: 2px; }
    .mytorch-conv .mt-im2col { margin-top: .8em; }
    .mytorch-conv .mt-status { color: #444; margin-top: .5em; font-size: 12px; }
  `);

  // ---- the page skeleton --------------------------------------------------------------
  el('div', { class: 'mt-title' }, root, data.title);
  const controls = el('div', { class: 'mt-controls' }, root);
  const caseSelect = el('select', { class: 'mt-case', 'aria-label': 'stride, padding and dilation' }, controls);
  data.cases.forEach((c, i) => el('option', { value: i }, caseSelect, c.label));
  const prev = el('button', { class: 'mt-prev', type: 'button' }, controls, '◀ prev');
  const slider = el('input', { class: 'mt-pos', type: 'range', min: 0, max: 0, value: 0, 'aria-label': 'window' }, controls);
  const next = el('button', { class: 'mt-next', type: 'button' }, controls, 'next ▶');
  const posLabel = el('span', { class: 'mt-pos-label' }, controls);

  const panels = el('div', { class: 'mt-panels' }, root);
  const matrixPanel = el('div', { class: 'mt-panel mt-im2col' }, root);
  const status = el('div', { class: 'mt-status', role: 'status' }, root);

  const x = data.input, w = data.kernel;
  const H = x.length, W = x[0].length, kh = w.length, kw = w[0].length;
  const wflat = [].concat(...w);

  function panel(parent, cls, caption) {
    const p = el('div', { class: 'mt-panel ' + cls }, parent);
    el('div', { class: 'mt-caption' }, p, caption);
    return p;
  }
  function grid(parent, ncols) {
    return el('div', { class: 'mt-grid', style: `grid-template-columns: repeat(${ncols}, 26px)` }, parent);
  }

  // ---- state: the case's geometry and the cells that the highlight moves over ------------
  let c = null, Ho = 0, Wo = 0, L = 0, pos = 0;
  let inputCells = [], outputCells = [], columnCells = [], yCells = [], matrixWrap = null;

  function showCase(index) {
    c = data.cases[index];
    caseSelect.value = index;
    const [ph, pw] = c.padding;
    Ho = c.output.length; Wo = c.output[0].length; L = Ho * Wo;
    panels.replaceChildren();
    matrixPanel.replaceChildren();

    // The input with its padding drawn around it: padded cell (r, s) is input (r - ph, s - pw).
    const inPanel = panel(panels, 'mt-input', `input x, ${H}×${W}` + (ph || pw ? `, padded by (${ph}, ${pw})` : ''));
    const inGrid = grid(inPanel, W + 2 * pw);
    inputCells = [];
    for (let r = 0; r < H + 2 * ph; r++) {
      const row = [];
      for (let s = 0; s < W + 2 * pw; s++) {
        const inside = r >= ph && r < ph + H && s >= pw && s < pw + W;
        row.push(el('div', { class: 'mt-cell' + (inside ? '' : ' mt-pad'), 'data-row': r, 'data-col': s }, inGrid,
                    inside ? fmt(x[r - ph][s - pw]) : '0'));
      }
      inputCells.push(row);
    }

    const kPanel = panel(panels, 'mt-kernel-panel', `kernel w, ${kh}×${kw}`);
    const kGrid = grid(kPanel, kw);
    w.forEach((row, i) => row.forEach((v, j) =>
      el('div', { class: 'mt-cell mt-kernel', 'data-row': i, 'data-col': j }, kGrid, fmt(v))));

    const oPanel = panel(panels, 'mt-output', `output y, ${Ho}×${Wo}`);
    const oGrid = grid(oPanel, Wo);
    outputCells = c.output.map((row, p) => row.map((v, q) => {
      const cell = el('div', { class: 'mt-cell', 'data-row': p, 'data-col': q }, oGrid, fmt(v));
      cell.addEventListener('click', () => setPosition(p * Wo + q));
      return cell;
    }));

    // im2col: the kernel as a column vector w on the left, the matrix X to its right with one
    // column per window, and y = w · X under it; row k of X meets w_k, column l of X gives y_l.
    el('div', { class: 'mt-caption' }, matrixPanel,
       `im2col: X is ${kh * kw}×${L}, one column per window; y = wᵀX`);
    matrixWrap = el('div', { class: 'mt-matrix-wrap' }, matrixPanel);
    const mGrid = el('div', { class: 'mt-grid', style: `grid-template-columns: 26px 8px repeat(${L}, 26px)` }, matrixWrap);
    columnCells = [];
    for (let k = 0; k < kh * kw; k++) {
      el('div', { class: 'mt-cell mt-kernel', 'data-k': k }, mGrid, fmt(wflat[k]));
      el('div', {}, mGrid);
      const row = [];
      for (let l = 0; l < L; l++) {
        const cell = el('div', { class: 'mt-cell' + (readsPadding(k, l) ? ' mt-pad' : ''), 'data-k': k, 'data-l': l },
                        mGrid, fmt(c.columns[k][l]));
        cell.addEventListener('click', () => setPosition(l));
        row.push(cell);
      }
      columnCells.push(row);
    }
    el('div', { class: 'mt-cell mt-head' }, mGrid, 'y');
    el('div', {}, mGrid);
    yCells = [];
    for (let l = 0; l < L; l++) {
      const cell = el('div', { class: 'mt-cell mt-y', 'data-l': l }, mGrid, fmt(c.output[Math.floor(l / Wo)][l % Wo]));
      cell.addEventListener('click', () => setPosition(l));
      yCells.push(cell);
    }

    slider.max = L - 1;
    root.dataset.case = c.label;
    setPosition(Math.min(pos, L - 1));
  }

  // Where tap k = (i, j) of window l = (p, q) reads the padded input:
  // row p*sh + i*dh, column q*sw + j*dw (the formula of chapter 25's im2col).
  function tap(k, l) {
    const i = Math.floor(k / kw), j = k % kw, p = Math.floor(l / Wo), q = l % Wo;
    return [p * c.stride[0] + i * c.dilation[0], q * c.stride[1] + j * c.dilation[1]];
  }
  function readsPadding(k, l) {
    const [r, s] = tap(k, l);
    return r < c.padding[0] || r >= c.padding[0] + H || s < c.padding[1] || s >= c.padding[1] + W;
  }

  function setPosition(l) {
    pos = Math.max(0, Math.min(l, L - 1));
    const p = Math.floor(pos / Wo), q = pos % Wo;
    for (const cell of root.querySelectorAll('.highlight, .mt-span')) cell.classList.remove('highlight', 'mt-span');
    // The window's span, first tap to last; with dilation > 1 the cells between taps are
    // inside the span but not read, and are tinted lighter than the taps.
    const [r0, s0] = tap(0, pos), [r1, s1] = tap(kh * kw - 1, pos);
    for (let r = r0; r <= r1; r++) for (let s = s0; s <= s1; s++) inputCells[r][s].classList.add('mt-span');
    let padded = 0;
    for (let k = 0; k < kh * kw; k++) {
      const [r, s] = tap(k, pos);
      inputCells[r][s].classList.remove('mt-span');
      inputCells[r][s].classList.add('highlight');
      columnCells[k][pos].classList.add('highlight');
      if (readsPadding(k, pos)) padded++;
    }
    outputCells[p][q].classList.add('highlight');
    yCells[pos].classList.add('highlight');
    // keep the highlighted column of a wide matrix in view (scrolling the matrix, not the page)
    const cell = yCells[pos];
    if (cell.offsetLeft < matrixWrap.scrollLeft ||
        cell.offsetLeft + cell.offsetWidth > matrixWrap.scrollLeft + matrixWrap.clientWidth)
      matrixWrap.scrollLeft = cell.offsetLeft - matrixWrap.clientWidth / 2;

    slider.value = pos;
    root.dataset.position = pos;
    posLabel.textContent = `window ${pos + 1} of ${L}`;
    const rows = [], cols = [];
    for (let i = 0; i < kh; i++) rows.push(r0 + i * c.dilation[0]);
    for (let j = 0; j < kw; j++) cols.push(s0 + j * c.dilation[1]);
    status.textContent = `y[${p}, ${q}] = w · X[:, ${pos}] = ${fmt(c.output[p][q])}: the window at rows ` +
      `${rows.join(', ')} and columns ${cols.join(', ')} of the padded input` +
      (padded ? `, ${padded} of its ${kh * kw} taps on padding.` : '.');
  }

  prev.addEventListener('click', () => setPosition(pos - 1));
  next.addEventListener('click', () => setPosition(pos + 1));
  slider.addEventListener('input', () => setPosition(Number(slider.value)));
  caseSelect.addEventListener('change', () => showCase(Number(caseSelect.value)));

  showCase(0);
};
