// keel's web app (docs/web-app.md): English and Chinese. The page is written in English; with
// Chinese chosen (kept in this browser), every text, placeholder and accessible name that is
// one of the app's own words is shown in Chinese, as the page is built and as it changes.
// What the server, the model and the session say stays as they said it.

const LANG_KEY = 'keel.lang';

const ZH = new Map(Object.entries({
  'New session': '新会话', Plugins: '插件', Automation: '自动化', Settings: '设置',
  Workspace: '工作区', Create: '创建', Cancel: '取消', 'Filter sessions': '筛选会话',
  'Search every session': '搜索全部会话', 'Search every session (Enter)': '搜索全部会话（回车）',
  'No session open': '未打开会话', 'HTML export': '导出 HTML', Todo: '待办', Jobs: '后台任务',
  Message: '消息', 'Message keel (Enter sends, Shift-Enter breaks the line, Esc stops, / for commands)':
    '给 keel 发消息（回车发送，Shift+回车换行，Esc 停止，/ 调出命令）',
  Send: '发送', Stop: '停止', 'Attach images': '附加图片', Mode: '模式', Default: '默认',
  'Read-only': '只读', Auto: '自动', Plan: '规划', Model: '模型', Effort: '推理强度',
  Rewind: '回退', Fork: '分叉', Copy: '复制', Copied: '已复制', Thinking: '思考',
  'Formation graph': '形成图', Approve: '批准', 'Approve for the session': '本会话内均批准',
  Deny: '拒绝', 'Approve plan': '批准计划', 'Keep planning': '继续规划', Answer: '回答',
  Decline: '拒绝回答', Trust: '信任', 'Do not trust': '不信任', 'Trust this workspace?': '信任此工作区？',
  'Approve the plan?': '批准该计划？', Output: '输出', Delete: '删除', Show: '显示',
  'MCP servers': 'MCP 服务器', 'New schedule': '新计划', Session: '会话', Prompt: '提示词',
  In: '间隔', Unit: '单位', seconds: '秒', minutes: '分钟', hours: '小时', Repeat: '重复',
  Schedule: '计划', 'No schedules.': '没有计划。', 'Pause goal': '暂停目标', 'Resume goal': '恢复目标',
  'Clear goal': '清除目标', General: '通用', Theme: '主题', System: '跟随系统', Light: '浅色',
  Dark: '深色', Language: '语言', Models: '模型', Shortcuts: '快捷键', Conversation: '对话',
  Sessions: '会话', 'Search results': '搜索结果', Goal: '目标', Status: '状态',
  'Session statistics': '会话统计', 'Files presented': '展示的文件', running: '运行中', done: '完成',
  failed: '失败', 'history compacted': '历史已压缩', 'Workspace trust': '工作区信任', Key: '按键',
  Action: '操作', 'Send the message': '发送消息', 'Break the line': '换行',
  'Stop the running turn': '停止当前轮次', 'List the commands': '列出命令', Endpoint: '端点',
  Chat: '对话', Trajectory: '轨迹', 'Session views': '会话视图',
}));

/** The language kept in this browser: `en` or `zh`. */
export function language() {
  try {
    return localStorage.getItem(LANG_KEY) === 'zh' ? 'zh' : 'en';
  } catch (_) {
    return 'en';
  }
}

let observer = null;
const originals = new WeakMap(); // node -> its English text or attributes

function translateText(node) {
  const text = node.nodeValue;
  const word = text.trim();
  const zh = word && ZH.get(word);
  if (!zh) return;
  originals.set(node, text);
  node.nodeValue = text.replace(word, zh);
}

function translateElement(elem) {
  for (const attr of ['aria-label', 'placeholder', 'title']) {
    const value = elem.getAttribute(attr);
    const zh = value && ZH.get(value);
    if (zh) {
      const kept = originals.get(elem) || {};
      kept[attr] = value;
      originals.set(elem, kept);
      elem.setAttribute(attr, zh);
    }
  }
}

function translate(root) {
  if (root.nodeType === Node.TEXT_NODE) {
    translateText(root);
    return;
  }
  if (root.nodeType !== Node.ELEMENT_NODE) return;
  translateElement(root);
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.nodeType === Node.TEXT_NODE) translateText(n);
    else translateElement(n);
  }
}

function restore(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  for (let n = walker.currentNode; n; n = walker.nextNode()) {
    const kept = originals.get(n);
    if (kept === undefined) continue;
    if (n.nodeType === Node.TEXT_NODE) n.nodeValue = kept;
    else for (const [attr, value] of Object.entries(kept)) n.setAttribute(attr, value);
    originals.delete(n);
  }
}

/** Show the page in `lang` (`en`, `zh`) from now on, and keep the choice. */
export function setLanguage(lang) {
  try {
    localStorage.setItem(LANG_KEY, lang);
  } catch (_) { /* this page only */ }
  applyLanguage(lang);
}

/** Apply `lang` to the page as it is and as it changes. */
export function applyLanguage(lang) {
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  if (observer) {
    observer.disconnect();
    observer = null;
  }
  if (lang !== 'zh') {
    restore(document.body);
    return;
  }
  translate(document.body);
  observer = new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'characterData') translateText(r.target);
      for (const n of r.addedNodes) translate(n);
    }
  });
  observer.observe(document.body, { childList: true, subtree: true, characterData: true });
}
