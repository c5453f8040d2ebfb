// keel's web app (docs/web-app.md): Markdown as models write it, rendered safely: every piece of
// text becomes a text node (never HTML), links only to http(s) and mailto. Blocks: fenced code
// (highlighted), headings, lists (one level of nesting), quotes, tables, rules, paragraphs;
// inline: code, bold, italic, strike-through, links and bare URLs.

const make = (tag, cls, ...children) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
};

/** `text` (Markdown) as a `div.md`. */
export function renderMarkdown(text) {
  const out = make('div', 'md');
  const parts = String(text).split(/^```/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const newline = part.indexOf('\n');
      const lang = newline > 0 ? part.slice(0, newline).trim().toLowerCase() : '';
      const code = (newline >= 0 ? part.slice(newline + 1) : part).replace(/\n$/, '');
      const pre = make('pre', 'code', make('code', null, highlight(code, lang)));
      if (lang) pre.dataset.lang = lang;
      out.append(pre);
      return;
    }
    blocks(out, part);
  });
  return out;
}

const HEADING = /^(#{1,6})\s+(.*)$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

function blocks(out, text) {
  const lines = text.split('\n');
  let para = [];
  const flush = () => {
    if (para.length) out.append(inline(make('p'), para.join('\n')));
    para = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (!line.trim()) { flush(); continue; }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      out.append(inline(make(`h${Math.min(heading[1].length + 2, 6)}`), heading[2].replace(/\s#+\s*$/, '')));
      continue;
    }
    if (RULE.test(line) && !para.length) { out.append(make('hr')); continue; }
    if (line.includes('|') && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      flush();
      const rows = [line];
      i += 2;
      while (i < lines.length && lines[i].includes('|') && lines[i].trim()) { rows.push(lines[i]); i += 1; }
      i -= 1;
      out.append(table(rows));
      continue;
    }
    if (/^\s*>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) { quoted.push(lines[i].replace(/^\s*>\s?/, '')); i += 1; }
      i -= 1;
      const quote = make('blockquote');
      blocks(quote, quoted.join('\n'));
      out.append(quote);
      continue;
    }
    if (ITEM.test(line)) {
      flush();
      const items = [];
      while (i < lines.length && (ITEM.test(lines[i]) || (/^\s{2,}\S/.test(lines[i]) && items.length))) {
        items.push(lines[i]);
        i += 1;
      }
      i -= 1;
      out.append(list(items));
      continue;
    }
    para.push(line);
  }
  flush();
}

/** List lines (items and their continuation lines) as `ul`/`ol`, nested by indentation. */
function list(lines) {
  const first = ITEM.exec(lines[0]);
  const ordered = /\d/.test(first[2]);
  const root = make(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) root.start = parseInt(first[2], 10);
  const base = first[1].length;
  let last = null;
  let nested = [];
  const closeNested = () => {
    if (nested.length && last) last.append(list(nested));
    nested = [];
  };
  for (const line of lines) {
    const item = ITEM.exec(line);
    if (item && item[1].length <= base + 1) {
      closeNested();
      last = inline(make('li'), item[3]);
      root.append(last);
    } else if (item) {
      nested.push(line);
    } else if (last) {
      if (nested.length) nested.push(line);
      else inline(last, ` ${line.trim()}`);
    }
  }
  closeNested();
  return root;
}

function table(rows) {
  const cells = (row) => row.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
  const [head, ...body] = rows;
  return make('div', 'table',
    make('table', null,
      make('thead', null, make('tr', null, cells(head).map((c) => inline(make('th'), c)))),
      make('tbody', null, body.map((r) => make('tr', null, cells(r).map((c) => inline(make('td'), c)))))));
}

const INLINE = /(`[^`\n]+`|\*\*[^*\n]+\*\*|__[^_\n]+__|~~[^~\n]+~~|\*[^*\s][^*\n]*\*|\b_[^_\s][^_\n]*_\b|\[[^\]\n]+\]\((?:[^()\s]|\([^()\s]*\))+\)|https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

/** `text`'s inline Markdown appended to `node`. */
export function inline(node, text) {
  for (const token of String(text).split(INLINE)) {
    if (!token) continue;
    if (token.length > 1 && token.startsWith('`') && token.endsWith('`')) {
      node.append(make('code', null, token.slice(1, -1)));
    } else if (token.length > 4 && ((token.startsWith('**') && token.endsWith('**')) || (token.startsWith('__') && token.endsWith('__')))) {
      node.append(inline(make('strong'), token.slice(2, -2)));
    } else if (token.length > 4 && token.startsWith('~~') && token.endsWith('~~')) {
      node.append(inline(make('del'), token.slice(2, -2)));
    } else if (token.length > 2 && ((token.startsWith('*') && token.endsWith('*')) || (token.startsWith('_') && token.endsWith('_')))) {
      node.append(inline(make('em'), token.slice(1, -1)));
    } else if (/^\[[^\]\n]+\]\(.+\)$/.test(token)) {
      const [, label, href] = /^\[([^\]\n]+)\]\((.+)\)$/.exec(token);
      node.append(link(href, label));
    } else if (/^https?:\/\//.test(token)) {
      node.append(link(token, token));
    } else {
      token.split('\n').forEach((line, i) => {
        if (i > 0) node.append(make('br'));
        node.append(line);
      });
    }
  }
  return node;
}

/** A link to `href` when it is http(s) or mailto; the label as text otherwise. */
function link(href, label) {
  if (!/^(https?:\/\/|mailto:)/i.test(href)) return document.createTextNode(label);
  const a = make('a', null, label);
  a.href = href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  return a;
}

// ---- Code: strings, comments, numbers and keywords of the languages models write most. ----

const KEYWORDS = {
  rust: 'as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while',
  js: 'async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield interface type enum implements',
  python: 'and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return self True try while with yield',
  go: 'break case chan const continue default defer else fallthrough for func go goto if import interface map nil package range return select struct switch true false type var',
  c: 'auto break case char class const continue default delete do double else enum extern false float for goto if inline int long namespace new nullptr private protected public return short signed sizeof static struct switch template this throw true try typedef typename union unsigned using virtual void volatile while',
  java: 'abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long new null package private protected public return short static super switch this throw throws true false try void volatile while',
  sh: 'case do done elif else esac export fi for function if in local return then until while echo exit set unset',
};
const ALIASES = {
  rs: 'rust', javascript: 'js', ts: 'js', typescript: 'js', jsx: 'js', tsx: 'js', mjs: 'js', py: 'python',
  golang: 'go', cpp: 'c', 'c++': 'c', h: 'c', hpp: 'c', cc: 'c', kotlin: 'java', kt: 'java', bash: 'sh',
  shell: 'sh', zsh: 'sh', console: 'sh',
};
const HASH_COMMENTS = new Set(['python', 'sh', 'toml', 'yaml', 'yml']);
const sets = new Map();

function keywords(lang) {
  if (!sets.has(lang)) sets.set(lang, new Set((KEYWORDS[lang] || '').split(' ')));
  return sets.get(lang);
}

/** `code` as text nodes and `span.tok-*` for its tokens (plain text for unknown languages). */
export function highlight(code, lang) {
  const name = ALIASES[lang] || lang;
  const known = KEYWORDS[name] || HASH_COMMENTS.has(name) || name === 'json';
  if (!known || code.length > 200_000) return document.createTextNode(code);
  const comment = HASH_COMMENTS.has(name) ? '#[^\\n]*' : '\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/';
  const pattern = new RegExp(`(${comment})|("(?:[^"\\\\\\n]|\\\\.)*"|'(?:[^'\\\\\\n]|\\\\.)*'|\`(?:[^\`\\\\]|\\\\.)*\`)|(\\b\\d[\\d_.]*(?:e[+-]?\\d+)?[a-z\\d]*\\b)|([A-Za-z_][\\w]*)`, 'g');
  const words = keywords(name);
  const out = document.createDocumentFragment();
  let at = 0;
  for (let m = pattern.exec(code); m; m = pattern.exec(code)) {
    if (m.index > at) out.append(code.slice(at, m.index));
    const [token, isComment, isString, isNumber, word] = m;
    let cls = null;
    if (isComment) cls = 'tok-c';
    else if (isString) cls = 'tok-s';
    else if (isNumber) cls = 'tok-n';
    else if (word && words.has(word)) cls = 'tok-k';
    out.append(cls ? make('span', cls, token) : token);
    at = m.index + token.length;
  }
  if (at < code.length) out.append(code.slice(at));
  return out;
}
