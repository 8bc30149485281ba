// readyspan's view: the rollout, node and Pod lists, a rollout's Gantt chart and a Pod's or a
// new Node's waterfall. Plain
// JavaScript, no libraries: the data comes from the JSON API (served) or from the page's own data
// block (the report), and SVG is built as markup strings so that nothing names a namespace URI.
(function () {
  'use strict';

  var cfg = JSON.parse(document.getElementById('rs-data').textContent || '{}');
  var report = cfg.report || null;
  var main = document.getElementById('main');
  var crumbs = document.getElementById('crumbs');
  var tip = document.getElementById('tip');
  var fNS = document.getElementById('f-ns');
  var fWL = document.getElementById('f-wl');

  var ROW = 20; // Gantt row height, px
  var OVERSCAN = 15; // rows drawn above and below the visible ones
  var LIST_MAX = 300; // Pod list lines drawn at once

  // Words for the segment and critical-path categories, and the Gantt's other marks, in legend
  // order (generated_categories.js). The server names each row's, segment's and span's category;
  // the page only gives them colours and words.
  var SEGMENTS = readyspanSegments;
  var SEGMENT_WORDS = {};
  SEGMENTS.forEach(function (s) { SEGMENT_WORDS[s[0]] = s[1]; });

  // A Pod waterfall's categories: its phases, and the kinds of time the catalogue names.
  var SPAN_CATS = [['submit', 'submit'], ['apiserver', 'apiserver'], ['controllers', 'controllers'], ['scheduling', 'scheduling'],
    ['kubelet', 'kubelet'], ['queued', 'image pull, queued'], ['image_pull', 'image pull'], ['readiness', 'readiness'], ['status', 'status']];
  // The parts of one span's bar: an image pull's wait in the kubelet's queue, then its transfer.
  var PART_WORDS = { queued: 'queued', image_pull: 'transfer' };
  // A node's waterfall's categories: the component each step waited on.
  var NODE_CATS = [['node_provisioner', 'provisioner (NodeClaim)'], ['node_instance', 'cloud instance'], ['kubelet', 'kubelet'],
    ['node_network', 'network'], ['node_agents', 'startup taints']];

  // Hatched fills (failing, a pull's queue wait, terminations not observed) tell these apart by
  // texture as well as colour; each chart's SVG carries the patterns its CSS fills name.
  var HATCHES = '<defs>' + ['failing', 'queued', 'unobserved'].map(function (n) {
    return '<pattern id="hatch-' + n + '" class="hatch-' + n + '" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)">' +
      '<rect class="hb" width="6" height="6"></rect><rect class="hs" width="3" height="6"></rect></pattern>';
  }).join('') + '</defs>';

  function esc(s) {
    return String(s === undefined || s === null ? '' : s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  // Strings from the cluster are shown as text, escaped, with their control characters and bidi
  // overrides made visible (\u202e): an Event's note must not reorder or hide what is around it.
  var INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

  function visible(s) {
    return String(s === undefined || s === null ? '' : s).replace(INVISIBLE, function (c) {
      return '\\u' + ('000' + c.charCodeAt(0).toString(16)).slice(-4);
    });
  }

  // At most CAP characters of one string are drawn: a 1 MB Event message without spaces would
  // otherwise keep the browser laying it out for a minute. show() offers the rest behind a
  // button; short() (names in links, options, tooltips) cuts with an ellipsis.
  var CAP = 2000;
  var uncut = []; // the strings behind the "show all" buttons on the page

  function cutAt(s, n) {
    var c = s.charCodeAt(n - 1);
    return s.slice(0, c >= 0xd800 && c <= 0xdbff ? n - 1 : n); // not half a surrogate pair
  }

  function short(s, n) {
    s = visible(s);
    n = n || CAP;
    return s.length > n ? cutAt(s, n - 1) + '…' : s;
  }

  function show(s) {
    s = visible(s);
    if (s.length <= CAP) return esc(s);
    uncut.push(s);
    return '<span class="cut">' + esc(cutAt(s, CAP)) + '…</span> <button type="button" class="more" data-more="' + (uncut.length - 1) +
      '">show all ' + s.length.toLocaleString('en') + ' characters</button>';
  }

  // "show all": the whole string in a read-only text box, its lines unwrapped when a word is
  // too long to wrap anyway. Chromium breaks a 1 MiB word into lines in over a minute (any
  // element that wraps it, a text box too); unwrapped, it lays it out in about 0.1 s.
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest && ev.target.closest('button.more');
    var s = b && uncut[+b.getAttribute('data-more')];
    if (typeof s !== 'string') return;
    var box = document.createElement('textarea');
    box.className = 'full';
    box.readOnly = true;
    box.spellcheck = false;
    if (/\S{500}/.test(s)) box.wrap = 'off';
    box.value = s;
    var cut = b.previousElementSibling;
    if (cut && cut.classList.contains('cut')) cut.remove();
    b.replaceWith(box);
  });

  // The part of a URL fragment that names a rollout or a Pod, or null for a malformed one.
  function decode(s) {
    try {
      return decodeURIComponent(s);
    } catch (e) {
      return null;
    }
  }

  // A component's span keeps the component's times (a kubelet whose clock is behind states one
  // that began before the Pod was created), so a length or an offset may be negative, or years.
  function fmtMs(ms) {
    if (typeof ms !== 'number' || !isFinite(ms)) return '?';
    if (ms < 0) return '−' + fmtMs(-ms);
    if (ms === 0) return '0 ms';
    if (ms < 1) return ms.toFixed(3) + ' ms';
    if (ms < 1000) return ms.toFixed(1) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(3) + ' s';
    var m = Math.floor(ms / 60000);
    return m + 'm ' + ((ms - m * 60000) / 1000).toFixed(1) + 's';
  }

  // offset is an offset from the start of the chart, signed: "+1.200 s", "−37.000 s".
  function offset(ms) { return ms < 0 ? fmtMs(ms) : '+' + fmtMs(ms); }

  // unit is where ms lies on a chart total ms long, from 0 (its start) to 1 (its end). A time
  // outside the chart is drawn at its edge, cut, and its numbers say where it truly lies.
  function unit(ms, total) {
    var f = ms / total;
    return f > 0 ? Math.min(1, f) : 0; // NaN too: nothing the server sends, but never a NaN width
  }

  // beyond says how a span's bar is cut, if it lies (partly) outside its chart.
  function beyond(startMs, endMs, total) {
    if (endMs < startMs) return 'ends before it starts, as its source stated: drawn one mark wide';
    if (startMs < 0 && endMs > total) return 'begins before the trace and ends after it: drawn cut at both edges';
    if (startMs < 0) return 'begins before the trace: drawn cut at its start';
    if (endMs > total) return 'ends after the trace: drawn cut at its end';
    return '';
  }

  // A length as the server states it when its ends are whole-second stamps ("10 s ±1 s"), else
  // to the millisecond.
  function fmtLen(ms, text) { return text ? String(text) : fmtMs(ms); }

  // "1 step", "2 steps".
  function count(n, one, many) { return n + ' ' + (n === 1 ? one : many || one + 's'); }

  // Absolute times in the browser's own zone, the zone named: "Dec 2, 2026, 16:41:15 CET".
  var TIME_FORMAT = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short'
  });

  function fmtTime(iso) {
    var d = new Date(iso);
    return isNaN(d) ? visible(iso) : TIME_FORMAT.format(d);
  }

  // timeHTML is fmtTime in a <time> element that carries the instant in UTC.
  function timeHTML(iso) {
    var d = new Date(iso);
    if (isNaN(d)) return esc(short(iso, 100));
    return '<time datetime="' + esc(d.toISOString()) + '" title="' + esc(d.toISOString()) + '">' + esc(fmtTime(iso)) + '</time>';
  }

  function traceLink(id) {
    if (!cfg.traceUI || !id || !/^https?:\/\//i.test(cfg.traceUI)) return ''; // readyspan checks it too (--trace-ui-url)
    var url = cfg.traceUI.split('{trace_id}').join(encodeURIComponent(id));
    return ' · <a href="' + esc(url) + '" target="_blank" rel="noopener noreferrer">open in trace UI</a>';
  }

  // barText writes a bar's text (its length, a failure's reason) where it fits, as Jaeger labels
  // its spans: right of the bar, else left of it, else over it (with a halo), cut to the room
  // there is. parts are [text, class] pairs; x0 and x1 bound the chart.
  var CHAR = 6.4; // px per character of the bars' 11 px text

  function barText(a, b, x0, x1, parts) {
    var n = parts.reduce(function (k, p) { return k + p[0].length; }, 0);
    var w = n * CHAR;
    var x, anchor = 'start', cls = 'bartext', room;
    if (b + 4 + w <= x1) x = b + 4;
    else if (a - 4 - w >= x0) { x = a - 4; anchor = 'end'; }
    else {
      var right = x1 - b - 4, left = a - x0 - 4, over = b - a - 8;
      if (over >= right && over >= left) { x = a + 4; room = over; cls += ' inbar'; }
      else if (right >= left) { x = b + 4; room = right; }
      else { x = a - 4; anchor = 'end'; room = left; }
      var max = Math.floor(room / CHAR);
      if (max < 3) return '';
      var cut = [];
      parts.forEach(function (p) {
        if (max <= 0) return;
        var t = p[0].length > max ? p[0].slice(0, Math.max(0, max - 1)) + '…' : p[0];
        max -= t.length;
        cut.push([t, p[1]]);
      });
      parts = cut;
    }
    var pill = '';
    if (cls !== 'bartext') { // over the bar: on a plate of the page's background, readable on any colour
      var len = parts.reduce(function (k, p) { return k + p[0].length; }, 0) * CHAR;
      pill = '<rect class="barplate" x="' + (x - 3).toFixed(1) + '" y="4" width="' + (len + 6).toFixed(1) + '" height="' + (ROW - 8) + '" rx="2"></rect>';
    }
    return pill + '<text class="' + cls + '" x="' + x.toFixed(1) + '" y="14" text-anchor="' + anchor + '">' + parts.map(function (p) {
      return p[1] ? '<tspan class="' + p[1] + '">' + esc(p[0]) + '</tspan>' : esc(p[0]);
    }).join('') + '</text>';
  }

  // ---- data: the API, or the report's data block ----

  function api(path) {
    return fetch(cfg.api + path, { headers: { Accept: 'application/json' } }).then(function (r) {
      if (r.ok) return r.json();
      return r.json().then(function (b) { throw new Error(b.error || r.statusText); },
        function () { throw new Error(r.status + ' ' + r.statusText); });
    });
  }

  function fromReport(table, key, what) {
    var v = report[table] && Object.prototype.hasOwnProperty.call(report[table], key) ? report[table][key] : null;
    return v ? Promise.resolve(v) : Promise.reject(new Error(what + ' is not in this report'));
  }

  var data = {
    rollouts: function () { return report ? Promise.resolve(report.rollouts) : api('rollouts'); },
    pods: function () { return report ? Promise.resolve(report.pods) : api('pods'); },
    rollout: function (id) {
      return report ? fromReport('gantts', id, 'rollout ' + id) : api('rollouts/' + encodeURIComponent(id));
    },
    pod: function (uid) {
      return report ? fromReport('views', uid, 'the trace of Pod ' + uid) : api('pods/' + encodeURIComponent(uid));
    },
    // A report written before nodes were traced has none.
    nodes: function () { return report ? Promise.resolve(report.nodes || []) : api('nodes'); },
    node: function (id) {
      return report ? fromReport('nodeViews', id, 'the startup of node ' + id) : api('nodes/' + encodeURIComponent(id));
    }
  };

  // ---- routing: #/, #/rollout/ID, #/pod/UID, #/node/ID; filters in the query ----

  function route() {
    var h = location.hash.replace(/^#\/?/, '');
    var q = '';
    var i = h.indexOf('?');
    if (i >= 0) { q = h.slice(i + 1); h = h.slice(0, i); }
    var params = new URLSearchParams(q);
    var parts = h.split('/').filter(Boolean).map(decode);
    if (parts.indexOf(null) >= 0) return { view: 'bad', id: '', ns: '', wl: '' };
    return { view: parts[0] || 'list', id: parts[1] || '', ns: params.get('namespace') || '', wl: params.get('workload') || '' };
  }

  var filter = { ns: '', wl: '' };

  function listHash() {
    var p = new URLSearchParams();
    if (filter.ns) p.set('namespace', filter.ns);
    if (filter.wl) p.set('workload', filter.wl);
    var q = p.toString();
    return '#/' + (q ? '?' + q : '');
  }

  function setOptions(sel, values, current) {
    var html = '<option value="">all</option>';
    values.forEach(function (v) {
      html += '<option value="' + esc(v) + '"' + (v === current ? ' selected' : '') + '>' + esc(short(v, 100)) + '</option>';
    });
    sel.innerHTML = html;
    sel.value = current;
  }

  function onFilter() {
    filter.ns = fNS.value;
    filter.wl = fWL.value;
    location.hash = listHash();
  }
  fNS.addEventListener('change', function () { fWL.value = ''; onFilter(); });
  fWL.addEventListener('change', onFilter);

  var generation = 0; // a newer navigation makes older renders stale

  function render() {
    var r = route();
    var gen = ++generation;
    hideTip();
    uncut = [];
    var done = function (p) { return p.then(function () { }, function (e) { if (gen === generation) showError(e); }); };
    if (r.view === 'bad') {
      document.getElementById('filters').hidden = true;
      return done(Promise.reject(new Error('This link is malformed (it is not a rollout, a Pod, a node or the list): ' + location.hash)));
    }
    if (r.view === 'rollout' && r.id) return done(data.rollout(r.id).then(function (v) { if (gen === generation) renderGantt(v); }));
    if (r.view === 'pod' && r.id) return done(data.pod(r.id).then(function (v) { if (gen === generation) renderPod(v); }));
    if (r.view === 'node' && r.id) return done(data.node(r.id).then(function (v) { if (gen === generation) renderNode(v); }));
    filter.ns = r.ns;
    filter.wl = r.wl;
    return done(Promise.all([data.rollouts(), data.pods(), data.nodes()]).then(function (res) {
      if (gen === generation) renderList(res[0] || [], res[1] || [], res[2] || []);
    }));
  }

  function showError(e) {
    crumbs.textContent = '';
    main.innerHTML = '<p class="err" role="alert">' + show(e && e.message ? e.message : e) + '</p><p><a href="' + esc(listHash()) + '">Back to the list</a></p>';
  }

  function setCrumbs(html) { crumbs.innerHTML = html; }

  // ---- the list ----

  function renderList(rollouts, pods, nodes) {
    document.getElementById('filters').hidden = false;
    var nss = {}, wls = {};
    rollouts.forEach(function (r) { nss[r.namespace] = 1; if (!filter.ns || filter.ns === r.namespace) wls[r.workload] = 1; });
    pods.forEach(function (p) { nss[p.namespace] = 1; if (p.workload && (!filter.ns || filter.ns === p.namespace)) wls[p.workload] = 1; });
    setOptions(fNS, Object.keys(nss).sort(), filter.ns);
    setOptions(fWL, Object.keys(wls).sort(), filter.wl);
    var match = function (ns, wl) { return (!filter.ns || filter.ns === ns) && (!filter.wl || filter.wl === wl); };
    var rs = rollouts.filter(function (r) { return match(r.namespace, r.workload); });
    var ps = pods.filter(function (p) { return match(p.namespace, p.workload); });
    setCrumbs(report ? esc(short(report.title, 200)) : 'recent rollouts, nodes and Pods');

    var h = '<h1>Rollouts</h1>';
    if (!rs.length) {
      h += '<p class="muted">No rollout ' + (rollouts.length ? 'matches the filters.' : 'yet: one appears when a Deployment, StatefulSet or DaemonSet finishes rolling out.') + '</p>';
    } else {
      h += '<table class="list nav" id="rollouts"><thead><tr><th>Workload</th><th>Kind</th><th class="wide">Started</th>' +
        '<th>Duration</th><th>Outcome</th><th class="wide">Pods</th><th>Critical path</th></tr></thead><tbody>';
      rs.forEach(function (r) {
        h += '<tr data-id="' + esc(r.id) + '"><td><a href="#/rollout/' + esc(encodeURIComponent(r.id)) + '">' + esc(short(r.workloadKind.toLowerCase() + ' ' +
          r.namespace + '/' + r.workload, 300)) + '</a></td><td>' + esc(short(r.kind, 100)) + '</td><td class="wide">' + timeHTML(r.start) +
          '</td><td class="num">' + esc(fmtLen(r.durationMs, r.durText)) + '</td><td><span class="badge o-' + esc(r.outcome) + '">' + esc(short(r.outcome, 100)) +
          '</span></td><td class="wide num">+' + r.newPods + ' −' + r.oldPods + '</td><td>' + show(r.sentence) + '</td></tr>';
      });
      h += '</tbody></table>';
    }
    if (nodes.length || !report) h += nodeList(nodes);
    h += '<h2>Pods</h2>';
    if (!ps.length) {
      h += '<p class="muted">No Pod trace ' + (pods.length ? 'matches the filters.' : 'yet.') + '</p>';
    } else {
      h += '<table class="list nav" id="pods"><thead><tr><th>Pod</th><th class="wide">Workload</th><th class="wide">Started</th>' +
        '<th>Duration</th><th>Outcome</th><th class="wide">Error</th></tr></thead><tbody>';
      ps.slice(0, LIST_MAX).forEach(function (p) {
        h += '<tr data-uid="' + esc(p.uid) + '"><td><a href="#/pod/' + esc(encodeURIComponent(p.uid)) + '">' + esc(short(p.namespace + '/' + p.name, 300)) +
          '</a></td><td class="wide">' + show(p.workload) + '</td><td class="wide">' + timeHTML(p.start) + '</td><td class="num">' +
          esc(fmtLen(p.durationMs, p.durText)) + '</td><td><span class="badge o-' + esc(p.outcome) + '">' + esc(short(p.outcome, 100)) + '</span></td><td class="wide err">' +
          show(p.error) + '</td></tr>';
      });
      h += '</tbody></table>';
      if (ps.length > LIST_MAX) h += '<p class="note">Showing the newest ' + LIST_MAX + ' of ' + ps.length + ' Pods; the filters narrow the list.</p>';
    }
    h += '<p class="hint">Keys: Tab or ↑/↓ to move, Enter to open, Esc to go back.</p>';
    main.innerHTML = h;
  }

  // nodeName is what a node is called: its name, else (before the Node exists) its NodeClaim's.
  function nodeName(n) { return n.name || (n.nodeClaim ? 'nodeclaim ' + n.nodeClaim : 'node ' + n.id); }

  // nodeList is the new Nodes' startups. A Node belongs to no namespace or workload: the filters
  // leave the list whole.
  function nodeList(nodes) {
    var h = '<h2>Nodes</h2>';
    if (!nodes.length) return h + '<p class="muted">No node startup yet: one appears when a Node added while readyspan runs can take Pods.</p>';
    if (filter.ns || filter.wl) h += '<p class="note">Nodes belong to no namespace: the filters do not narrow them.</p>';
    h += '<table class="list nav" id="nodes"><thead><tr><th>Node</th><th class="wide">Provisioner</th><th class="wide">NodePool</th>' +
      '<th class="wide">Started</th><th>Duration</th><th>Outcome</th><th class="wide">Pods waited</th><th class="wide">Reason</th></tr></thead><tbody>';
    nodes.slice(0, LIST_MAX).forEach(function (n) {
      h += '<tr data-id="' + esc(n.id) + '"><td><a href="#/node/' + esc(encodeURIComponent(n.id)) + '">' + esc(short(nodeName(n), 300)) +
        '</a></td><td class="wide">' + show(n.provisioner) + '</td><td class="wide">' + show(n.nodePool) + '</td><td class="wide">' + timeHTML(n.start) +
        '</td><td class="num">' + esc(fmtLen(n.durationMs, n.durText)) + '</td><td><span class="badge o-' + esc(n.outcome) + '">' + esc(short(n.outcome, 100)) +
        '</span></td><td class="wide num">' + esc(n.waiters) + '</td><td class="wide err">' + show(n.reason) + '</td></tr>';
    });
    h += '</tbody></table>';
    if (nodes.length > LIST_MAX) h += '<p class="note">Showing the newest ' + LIST_MAX + ' of ' + nodes.length + ' nodes.</p>';
    return h;
  }

  // ↑/↓ move between the rows' links of a list.
  main.addEventListener('keydown', function (ev) {
    var a = ev.target;
    if (a.tagName !== 'A' || !a.closest('table.nav')) return;
    if (ev.key !== 'ArrowDown' && ev.key !== 'ArrowUp') return;
    var tr = a.closest('tr');
    var next = ev.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling;
    if (next && next.querySelector('a')) { next.querySelector('a').focus(); ev.preventDefault(); }
  });

  // ---- tooltips ----

  function showTip(text, x, y) {
    tip.textContent = short(text);
    tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var left = Math.min(x + 12, window.innerWidth - w - 4);
    var top = y + 16 + h > window.innerHeight ? y - h - 8 : y + 16;
    tip.style.left = Math.max(4, left) + 'px';
    tip.style.top = Math.max(4, top) + 'px';
  }

  function hideTip() { tip.hidden = true; }

  // legend lists the categories a chart draws (all of items when present is not given).
  function legend(items, present) {
    if (present) items = items.filter(function (it) { return present[it[0]]; });
    return '<div class="legend" aria-label="Legend">' + items.map(function (it) {
      return '<span><i class="sw c-' + esc(it[0]) + '"></i>' + esc(it[1]) + '</span>';
    }).join('') + '</div>';
  }

  // ticks draws the time axis of a chart width w (px) for total ms, starting at x0.
  function ticks(x0, w, total, height, labels) {
    if (!(total > 0)) total = 1;
    var target = Math.max(2, Math.floor(w / 90));
    var raw = total / target;
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var label = tickFormat(step, total);
    var out = '';
    for (var k = 0; k * step <= total + 1e-9; k++) {
      var t = k * step;
      var x = x0 + (t / total) * w;
      out += '<line class="tick" x1="' + x.toFixed(1) + '" x2="' + x.toFixed(1) + '" y1="0" y2="' + height + '"></line>';
      if (labels && x + 64 <= x0 + w + 8) out += '<text class="ticktext" x="' + (x + 2).toFixed(1) + '" y="12">' + esc(label(t)) + '</text>';
    }
    return out;
  }

  // tickFormat is one format for every tick of an axis: one unit (ms under a second, else s) and
  // as many decimals as the step needs ("0 s, 2 s, 4 s", "0.0 s, 0.5 s, 1.0 s").
  function tickFormat(step, total) {
    var unit = total < 1000 ? 1 : 1000;
    var v = step / unit;
    var d = v >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(v) - 1e-9));
    var name = unit === 1 ? ' ms' : ' s';
    return function (t) { return (t / unit).toFixed(d) + name; };
  }

  function layout(el) {
    var width = Math.max(280, el.clientWidth - 2);
    var label = width < 600 ? Math.round(width * 0.34) : Math.min(320, Math.round(width * 0.28));
    return { width: width, label: label, chart: width - label - 24 };
  }

  // clip shortens a label to fit px (about 7 px a character).
  function clip(s, px) {
    var n = Math.max(4, Math.floor(px / 7));
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }

  // critical is the critical path as a breakdown, largest share first: each category's words,
  // its time (with the rollout's precision), its share and a bar as long as the share. It is not
  // a timeline: a category's time is spread over the rollout, and the Gantt below shows where.
  function critical(v) {
    var crit = (v.critical || []).filter(function (c) { return c.ms > 0; });
    if (!crit.length) return '';
    crit.sort(function (a, b) { return b.ms - a.ms; });
    return '<table class="critical" aria-label="Critical path by category"><caption>Critical path, ' + esc(fmtLen(v.durationMs, v.durText)) +
      ', by what it waited on</caption><tbody>' + crit.map(function (c) {
        return '<tr data-cat="' + esc(c.name) + '"><td class="cat"><i class="sw c-' + esc(c.name) + '"></i>' + esc(short(c.words, 200)) + '</td>' +
          '<td class="num secs">' + esc(c.text || fmtMs(c.ms)) + '</td><td class="num pct">' + (c.pct > 0 ? c.pct : '<1') + '%</td>' +
          '<td class="share"><div class="c-' + esc(c.name) + '" data-width="' + Math.max(0.5, Math.min(100, c.pct)) + '%"></div></td></tr>';
      }).join('') + '</tbody></table>';
  }

  // ---- a rollout's Gantt chart, virtualised: only the rows in view are drawn ----

  function renderGantt(v) {
    document.getElementById('filters').hidden = true;
    setCrumbs('<a href="' + esc(listHash()) + '">rollouts</a> / ' + esc(short(v.namespace + '/' + v.workload, 300)));
    var total = v.durationMs > 0 ? v.durationMs : 1;
    var h = '<h1>' + esc(short(v.workloadKind.toLowerCase() + ' ' + v.namespace + '/' + v.workload, 300)) +
      ' <span class="badge">' + esc(short(v.kind, 100)) + '</span> <span class="badge o-' + esc(v.outcome) + '">' + esc(short(v.outcome, 100)) + '</span></h1>';
    h += '<p class="meta">' + esc(fmtLen(v.durationMs, v.durText)) + ' · started ' + timeHTML(v.start) + ' · generation ' + esc(v.generation) +
      (v.revision ? ' · revision ' + show(v.revision) : '') + (v.strategy ? ' · ' + show(v.strategy) : '') + ' · ' + count(v.newPods, 'new Pod') + ', ' +
      v.oldPods + ' old · ' + count(v.steps, 'step') + ', ' + count(v.waves, 'wave') + ' · trace <code>' + esc(short(v.traceId, 100)) + '</code>' + traceLink(v.traceId) + '</p>';
    h += '<p class="sentence">' + show(v.sentence) + '</p>';
    if (v.reason) h += '<p class="err">' + show(v.reason) + '</p>';
    h += critical(v);
    var present = { step: 1 };
    v.rows.forEach(function (r) { (r.segments || []).forEach(function (g) { present[g.cat] = 1; }); });
    h += legend(SEGMENTS, present) +
      '<p class="hint">★ and a shaded row: on the critical path. Click a Pod, or ↑/↓ then Enter, for its waterfall; Esc goes back.</p>';
    h += '<div class="chart" id="gantt" tabindex="0" role="grid" aria-label="Gantt chart: one row per step and Pod" aria-rowcount="' +
      v.rows.length + '" data-rows="' + v.rows.length + '"><div class="axis"></div><div class="scroll"><div class="spacer"></div>' +
      '<div class="win"></div></div></div><div class="detail" id="detail" aria-live="polite"></div>';
    main.innerHTML = h;
    // Set here, not in a style attribute: the page's policy allows no inline style.
    main.querySelectorAll('.critical [data-width]').forEach(function (d) { d.style.width = d.getAttribute('data-width'); });

    var chart = document.getElementById('gantt');
    var axis = chart.querySelector('.axis');
    var scroll = chart.querySelector('.scroll');
    var spacer = chart.querySelector('.spacer');
    var win = chart.querySelector('.win');
    var detail = document.getElementById('detail');
    var rows = v.rows;
    var steps = rows.filter(function (r) { return r.type === 'step'; });
    var sel = -1;
    var L;

    spacer.style.height = rows.length * ROW + 'px';
    scroll.style.height = Math.min(rows.length * ROW + 2, Math.max(200, Math.round(window.innerHeight * 0.7))) + 'px';

    function x(ms) { return L.label + 6 + unit(ms, total) * L.chart; }

    function rowSVG(r, i) {
      var cls = 'row type-' + r.type + (r.critical ? ' crit' : '') + (i === sel ? ' sel' : '') + (r.type === 'pod' && r.uid ? ' open' : '');
      var y = i * ROW;
      var s = '<g class="' + cls + '" data-i="' + i + '"' + (r.uid ? ' data-uid="' + esc(r.uid) + '"' : '') + ' transform="translate(0,' + y + ')">';
      s += '<rect class="band" x="0" y="0" width="' + L.width + '" height="' + ROW + '"></rect>';
      var indent = r.type === 'step' ? 4 : 16;
      var prefix = r.type === 'pod' ? '+ ' : r.type === 'old' ? '− ' : r.type === 'blocked' ? '⊘ ' : '';
      if (r.critical) s += '<text class="mark" x="' + (indent - 12 < 0 ? 0 : indent - 12) + '" y="14">★</text>';
      s += '<text class="label' + (r.type === 'step' ? ' step' : '') + '" x="' + (indent + (r.critical && r.type === 'step' ? 10 : 0)) + '" y="14">' +
        esc(clip(short(prefix + r.label + (r.killed ? ' (killed)' : ''), 300), L.label - indent - 4)) + '</text>';
      if (r.type === 'step') {
        var x1 = x(r.startMs), x2 = x(r.endMs);
        s += '<rect class="steptick" x="' + (x1 - 1).toFixed(1) + '" y="3" width="3" height="' + (ROW - 6) + '" data-seg="step"></rect>';
        if (x2 > x1 + 2) s += '<line class="stepline" x1="' + (x1 + 2).toFixed(1) + '" x2="' + x2.toFixed(1) + '" y1="' + ROW / 2 + '" y2="' + ROW / 2 + '"></line>';
      } else {
        var failed = r.error || r.outcome === 'failed' || r.outcome === 'stuck';
        (r.segments || []).forEach(function (g, j) {
          var a = x(g.startMs), b = x(g.endMs);
          s += '<rect class="seg c-' + esc(g.cat) + (r.killed ? ' killed' : '') + (failed ? ' error' : '') +
            '" data-seg="' + j + '" x="' + a.toFixed(1) + '" y="4" width="' + Math.max(1, b - a).toFixed(1) + '" height="' + (ROW - 8) + '"></rect>';
        });
        var end = x(r.endMs);
        if (r.endUnknown) { s += '<text class="open-end" x="' + (end + 2).toFixed(1) + '" y="14">…</text>'; end += 10; }
        s += barText(x(r.startMs), end, L.label + 6, L.width - 2, rowText(r));
      }
      return s + '</g>';
    }

    // rowText is what a row says on the chart: its length and, for a failing Pod, why.
    function rowText(r) {
      var parts = [[fmtLen(r.endMs - r.startMs, r.durText), '']];
      if (r.error && r.message) parts.push([' ✕ ' + short(r.message, 200), 'err']);
      return parts;
    }

    function draw() {
      L = layout(chart);
      axis.innerHTML = '<svg width="' + L.width + '" height="18" aria-hidden="true">' + ticks(L.label + 6, L.chart, total, 18, true) + '</svg>';
      var first = Math.max(0, Math.floor(scroll.scrollTop / ROW) - OVERSCAN);
      var last = Math.min(rows.length, Math.ceil((scroll.scrollTop + scroll.clientHeight) / ROW) + OVERSCAN);
      var hgt = (last - first) * ROW;
      var s = '<svg width="' + L.width + '" height="' + hgt + '" viewBox="0 ' + first * ROW + ' ' + L.width + ' ' + hgt + '">' + HATCHES;
      for (var i = first; i < last; i++) s += rowSVG(rows[i], i);
      s += ticks(L.label + 6, L.chart, total, hgt, false).replace(/y1="0"/g, 'y1="' + first * ROW + '"').replace(/y2="\d+"/g, 'y2="' + last * ROW + '"');
      steps.forEach(function (st) {
        var sx = x(st.startMs).toFixed(1);
        s += '<line class="wave" x1="' + sx + '" x2="' + sx + '" y1="' + first * ROW + '" y2="' + last * ROW + '"></line>';
      });
      s += '</svg>';
      win.style.top = first * ROW + 'px';
      win.innerHTML = s;
    }

    function describe(r) {
      var kind = r.type === 'step' ? 'step' : r.type === 'old' ? 'old Pod, terminating' : r.type === 'blocked' ? 'Pod creates refused' : 'new Pod';
      var t = (r.type === 'step' ? r.label : r.label + ' (' + kind + ')') + '\n' + offset(r.startMs) + ' for ' + fmtLen(r.endMs - r.startMs, r.durText) +
        (r.endUnknown ? ' (end not observed)' : '') + (r.critical ? '\non the critical path' : '');
      var cut = beyond(r.startMs, r.endMs, total);
      if (cut) t += '\n' + cut;
      if (r.node) t += '\nnode ' + r.node;
      if (r.outcome) t += '\noutcome ' + r.outcome;
      if (r.killed) t += '\nkilled after its grace period';
      if (r.message) t += '\n' + (r.error && r.type === 'pod' ? 'failing: ' : '') + r.message;
      return t;
    }

    function select(i, scrollTo) {
      if (i < 0 || i >= rows.length) return;
      sel = i;
      if (scrollTo) {
        var top = i * ROW;
        if (top < scroll.scrollTop) scroll.scrollTop = top;
        else if (top + ROW > scroll.scrollTop + scroll.clientHeight) scroll.scrollTop = top + ROW - scroll.clientHeight;
      }
      draw();
      var r = rows[i];
      chart.setAttribute('aria-activedescendant', '');
      detail.innerHTML = '<p>' + show(describe(r)).replace(/\n/g, ' · ') + (r.type === 'pod' && r.uid ? ' · <a href="#/pod/' + esc(encodeURIComponent(r.uid)) + '">waterfall</a>' : '') + '</p>';
    }

    function open(i) {
      var r = rows[i];
      if (r && r.type === 'pod' && r.uid) location.hash = '#/pod/' + encodeURIComponent(r.uid);
    }

    scroll.addEventListener('scroll', function () { window.requestAnimationFrame(draw); });
    win.addEventListener('click', function (ev) {
      var g = ev.target.closest('g.row');
      if (!g) return;
      var i = +g.getAttribute('data-i');
      select(i, false);
      open(i);
    });
    win.addEventListener('mousemove', function (ev) {
      var g = ev.target.closest('g.row');
      if (!g) { hideTip(); return; }
      var r = rows[+g.getAttribute('data-i')];
      var t = describe(r);
      var seg = ev.target.getAttribute('data-seg');
      if (seg !== null && seg !== 'step' && r.segments && r.segments[+seg]) {
        var sg = r.segments[+seg];
        t = (SEGMENT_WORDS[sg.cat] || sg.cat) + ': ' + fmtMs(sg.endMs - sg.startMs) + ' (' + offset(sg.startMs) + ')\n' + t;
      }
      showTip(t, ev.clientX, ev.clientY);
    });
    win.addEventListener('mouseleave', hideTip);
    chart.addEventListener('keydown', function (ev) {
      var page = Math.max(1, Math.floor(scroll.clientHeight / ROW) - 1);
      var k = ev.key;
      if (k === 'ArrowDown') select(sel < 0 ? 0 : Math.min(rows.length - 1, sel + 1), true);
      else if (k === 'ArrowUp') select(Math.max(0, sel - 1), true);
      else if (k === 'PageDown') select(Math.min(rows.length - 1, Math.max(0, sel) + page), true);
      else if (k === 'PageUp') select(Math.max(0, sel - page), true);
      else if (k === 'Home') select(0, true);
      else if (k === 'End') select(rows.length - 1, true);
      else if (k === 'Enter') open(sel);
      else return;
      ev.preventDefault();
    });
    onResize = draw;
    draw();
  }

  // ---- a Pod's waterfall ----

  function spanTip(s, total) {
    var t = s.label + ' · ' + s.service + '\n' + offset(s.startMs) + ' for ' + fmtLen(s.durMs, s.durText);
    var cut = beyond(s.startMs, s.startMs + s.durMs, total);
    if (cut) t += '\n' + cut;
    (s.parts || []).forEach(function (p) { t += '\n' + (PART_WORDS[p.cat] || p.cat) + ': ' + fmtMs(p.endMs - p.startMs); });
    t += '\nstart: ' + (s.sourceStart || '?') + ' (precision ' + (s.precisionStart || '?') + ')';
    t += '\nend: ' + (s.sourceEnd || '?') + ' (precision ' + (s.precisionEnd || '?') + ')';
    if (s.notObserved) t += '\nnot observed: derived from its neighbours';
    if (s.error) t += '\nERROR ' + (s.message || '');
    (s.events || []).forEach(function (e) { t += '\nevent ' + e.name + ' at ' + offset(e.atMs); });
    return t;
  }

  function renderPod(v) {
    document.getElementById('filters').hidden = true;
    var back = v.rollout ? '<a href="#/rollout/' + esc(encodeURIComponent(v.rollout)) + '">rollout</a> / ' : '';
    setCrumbs('<a href="' + esc(listHash()) + '">list</a> / ' + back + esc(short(v.namespace + '/' + v.name, 300)));
    var h = '<h1>' + esc(short(v.namespace + '/' + v.name, 300)) + ' <span class="badge o-' + esc(v.outcome) + '">' + esc(short(v.outcome, 100)) + '</span></h1>';
    h += '<p class="meta">' + esc(fmtLen(v.durationMs, v.durText)) + ' · started ' + timeHTML(v.start) + (v.node ? ' · node ' + show(v.node) : '') +
      (v.workload ? ' · ' + show(v.workload) : '') + ' · trace <code>' + esc(short(v.traceId, 100)) + '</code>' + traceLink(v.traceId) +
      (v.rollout ? ' · <a href="#/rollout/' + esc(encodeURIComponent(v.rollout)) + '">its rollout</a>' : '') + nodeStartup(v.spans) + '</p>';
    if (v.error) h += '<p class="err" role="alert">' + show(v.error) + '</p>';
    main.innerHTML = h + waterfallHTML(v.spans, SPAN_CATS);
    waterfall(v.spans, v.durationMs);
  }

  // nodeStartup links a Pod to the startup of the new Node it waited for, where it is held.
  function nodeStartup(spans) {
    var sp = spans.filter(function (s) { return s.nodeTrace && s.nodeHeld; })[0];
    return sp ? ' · <a class="node-startup" href="#/node/' + esc(encodeURIComponent(sp.nodeTrace)) + '">its new node\'s startup</a>' : '';
  }

  // ---- a new Node's startup: its steps as a Pod's waterfall, and the Pods that waited for it ----

  function renderNode(v) {
    document.getElementById('filters').hidden = true;
    setCrumbs('<a href="' + esc(listHash()) + '">list</a> / ' + esc(short(nodeName(v), 300)));
    var h = '<h1>' + esc(short(nodeName(v), 300)) + ' <span class="badge o-' + esc(v.outcome) + '">' + esc(short(v.outcome, 100)) + '</span></h1>';
    var about = [];
    if (v.provisioner) about.push('provisioner ' + show(v.provisioner));
    if (v.nodeClaim) about.push('nodeclaim ' + show(v.nodeClaim));
    if (v.nodePool) about.push('nodepool ' + show(v.nodePool));
    h += '<p class="meta">' + esc(fmtLen(v.durationMs, v.durText)) + ' · started ' + timeHTML(v.start) + (about.length ? ' · ' + about.join(' · ') : '') +
      ' · trace <code>' + esc(short(v.id, 100)) + '</code>' + traceLink(v.id) + '</p>';
    if (v.reason) h += '<p class="err" role="alert">' + show(v.reason) + '</p>';
    main.innerHTML = h + waterfallHTML(v.spans, NODE_CATS) + waitedList(v.waited || []);
    waterfall(v.spans, v.durationMs);
  }

  // waitedList is the Pods that waited for a node, each opening its waterfall where it is held.
  function waitedList(ws) {
    if (!ws.length) return '';
    return '<h2>' + count(ws.length, 'Pod') + ' waited for it</h2><ul class="waited" id="waited">' + ws.map(function (w) {
      var name = esc(short(w.pod, 300));
      return '<li>' + (w.held && w.uid ? '<a href="#/pod/' + esc(encodeURIComponent(w.uid)) + '">' + name + '</a>' : name + ' <span class="muted">(its trace is not held)</span>') + '</li>';
    }).join('') + '</ul>';
  }

  // ---- a waterfall: a Pod's or a node's spans, one row each beneath its parent ----

  // waterfallHTML is a waterfall's legend (of cats, those drawn), its chart and its detail.
  function waterfallHTML(spans, cats) {
    var present = {};
    spans.forEach(function (sp) { present[sp.cat] = 1; (sp.parts || []).forEach(function (p) { present[p.cat] = 1; }); });
    return legend(cats, present) +
      '<p class="hint">Hover a bar for where its times came from; ✕ marks a failure, ◆ a span event. ↑/↓ select a span, Esc goes back.</p>' +
      '<div class="chart" id="waterfall" tabindex="0" role="grid" aria-label="Waterfall: one row per span" aria-rowcount="' + spans.length +
      '" data-rows="' + spans.length + '"><div class="axis"></div><div class="body"></div></div><div class="detail" id="detail" aria-live="polite"></div>';
  }

  // spanDetail is a waterfall row's detail: its times, its bounds' sources, its error, events
  // and attributes, and the new node's startup it links to.
  function spanDetail(sp, total) {
    var rowsHTML = '<tr><td>span</td><td>' + show(sp.label) + ' (' + show(sp.service) + ')</td></tr>' +
      '<tr><td>time</td><td>' + offset(sp.startMs) + ' for ' + esc(fmtLen(sp.durMs, sp.durText)) + (sp.parts || []).map(function (p) {
        return ', ' + esc(PART_WORDS[p.cat] || p.cat) + ' ' + fmtMs(p.endMs - p.startMs);
      }).join('') + '</td></tr>' +
      (beyond(sp.startMs, sp.startMs + sp.durMs, total) ? '<tr><td>drawn</td><td>' + esc(beyond(sp.startMs, sp.startMs + sp.durMs, total)) + '</td></tr>' : '') +
      '<tr><td>start</td><td>' + show(sp.sourceStart) + ', precision ' + show(sp.precisionStart) + '</td></tr>' +
      '<tr><td>end</td><td>' + show(sp.sourceEnd) + ', precision ' + show(sp.precisionEnd) + '</td></tr>';
    if (sp.error) rowsHTML += '<tr><td>error</td><td class="err">' + show(sp.message) + '</td></tr>';
    if (sp.nodeTrace) {
      rowsHTML += '<tr><td>new node</td><td>' + (sp.nodeHeld ? '<a href="#/node/' + esc(encodeURIComponent(sp.nodeTrace)) + '">its startup</a>' :
        'its startup, trace <code>' + esc(short(sp.nodeTrace, 100)) + '</code>, is not held') + '</td></tr>';
    }
    (sp.events || []).forEach(function (e) {
      rowsHTML += '<tr><td>event</td><td>' + show(e.name) + ' at ' + offset(e.atMs) + (e.attrs ? ' ' + show(JSON.stringify(e.attrs)) : '') + '</td></tr>';
    });
    Object.keys(sp.attrs || {}).sort().forEach(function (k) {
      rowsHTML += '<tr><td>' + esc(short(k, 100)) + '</td><td>' + show(sp.attrs[k]) + '</td></tr>';
    });
    return rowsHTML;
  }

  // waterfall draws the chart waterfallHTML laid out, for spans over durationMs, and answers
  // the mouse and the keys on it.
  function waterfall(spans, durationMs) {
    var chart = document.getElementById('waterfall');
    var body = chart.querySelector('.body');
    var detail = document.getElementById('detail');
    var total = durationMs > 0 ? durationMs : 1;
    var sel = -1;
    var L;

    function x(ms) { return L.label + 6 + unit(ms, total) * L.chart; }

    function draw() {
      L = layout(chart);
      chart.querySelector('.axis').innerHTML = '<svg width="' + L.width + '" height="18" aria-hidden="true">' + ticks(L.label + 6, L.chart, total, 18, true) + '</svg>';
      var hgt = spans.length * ROW;
      var s = '<svg width="' + L.width + '" height="' + hgt + '">' + HATCHES + ticks(L.label + 6, L.chart, total, hgt, false);
      spans.forEach(function (sp, i) {
        var cls = 'row span' + (i === sel ? ' sel' : '') + (sp.error ? ' failed' : '');
        s += '<g class="' + cls + '" data-i="' + i + '" transform="translate(0,' + i * ROW + ')"><rect class="band" x="0" y="0" width="' + L.width + '" height="' + ROW + '"></rect>';
        var indent = 4 + sp.depth * 12;
        s += '<text class="label" x="' + indent + '" y="14">' + esc(clip(short(sp.label, 300), L.label - indent - 4)) + '</text>';
        var a = x(sp.startMs), b = x(sp.startMs + sp.durMs);
        var parts = sp.parts && sp.parts.length ? sp.parts : [{ cat: sp.cat, startMs: sp.startMs, endMs: sp.startMs + sp.durMs }];
        parts.forEach(function (p) {
          var pa = x(p.startMs), pb = x(p.endMs);
          s += '<rect class="seg c-' + esc(p.cat) + (sp.error ? ' error' : '') + '" data-cat="' + esc(p.cat) + '" x="' + pa.toFixed(1) + '" y="4" width="' +
            Math.max(parts.length > 1 ? 0.5 : 1.5, pb - pa).toFixed(1) + '" height="' + (ROW - 8) + '"' + (sp.notObserved ? ' fill-opacity="0.35"' : '') + '></rect>';
        });
        var words = [[fmtLen(sp.durMs, sp.durText), '']];
        if (sp.error) words = [['✕ ', 'errmark']].concat(words, sp.message ? [[' ' + short(sp.message, 200), 'err']] : []);
        s += barText(a, Math.max(b, a + 1.5), L.label + 6, L.width - 2, words);
        (sp.events || []).forEach(function (e) {
          var ex = x(e.atMs);
          var warn = /fail|unhealthy|backoff|err|preempt/i.test(e.name);
          s += '<path class="event' + (warn ? ' warn' : '') + '" d="M' + ex.toFixed(1) + ' 4 l5 6 l-5 6 l-5 -6 z"></path>';
        });
        s += '</g>';
      });
      body.innerHTML = s + '</svg>';
    }

    function select(i) {
      if (i < 0 || i >= spans.length) return;
      sel = i;
      draw();
      detail.innerHTML = '<table>' + spanDetail(spans[i], total) + '</table>';
    }

    body.addEventListener('mousemove', function (ev) {
      var g = ev.target.closest('g.row');
      if (!g) { hideTip(); return; }
      showTip(spanTip(spans[+g.getAttribute('data-i')], total), ev.clientX, ev.clientY);
    });
    body.addEventListener('mouseleave', hideTip);
    body.addEventListener('click', function (ev) {
      var g = ev.target.closest('g.row');
      if (g) select(+g.getAttribute('data-i'));
    });
    chart.addEventListener('keydown', function (ev) {
      if (ev.key === 'ArrowDown') select(sel < 0 ? 0 : Math.min(spans.length - 1, sel + 1));
      else if (ev.key === 'ArrowUp') select(Math.max(0, sel - 1));
      else if (ev.key === 'Home') select(0);
      else if (ev.key === 'End') select(spans.length - 1);
      else return;
      ev.preventDefault();
    });
    onResize = draw;
    draw();
  }

  // Tooltips of plain HTML elements (the critical-path bar).
  main.addEventListener('mousemove', function (ev) {
    var t = ev.target.closest && ev.target.closest('[data-tip]');
    if (t) showTip(t.getAttribute('data-tip'), ev.clientX, ev.clientY);
  });
  main.addEventListener('mouseout', function (ev) {
    if (ev.target.closest && ev.target.closest('[data-tip]')) hideTip();
  });

  var onResize = null;
  var resizeQueued = false;
  window.addEventListener('resize', function () {
    if (resizeQueued || !onResize) return;
    resizeQueued = true;
    window.requestAnimationFrame(function () { resizeQueued = false; if (onResize) onResize(); });
  });

  // Esc goes back up: a Pod to its rollout or the list, a rollout to the list.
  document.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Escape' || ev.target.tagName === 'SELECT') return;
    var r = route();
    if (r.view === 'list') return;
    var a = crumbs.querySelectorAll('a');
    location.hash = a.length ? a[a.length - 1].getAttribute('href') : listHash();
  });

  window.addEventListener('hashchange', function () {
    onResize = null;
    render().then(function () {
      var focus = document.getElementById('gantt') || document.getElementById('waterfall') || main;
      focus.focus({ preventScroll: true });
    });
  });
  render();
})();
