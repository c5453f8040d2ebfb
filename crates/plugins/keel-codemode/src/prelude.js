// Code Mode's prelude: evaluated once in each fresh context, before the program. It receives
// the host's two functions and the declared tool names, installs `tools` and `console` as
// read-only globals and returns the helpers the host drives the run with. The host functions
// stay inside this closure: the program can reach them only through `tools` and `console`.
(function (hostCall, hostLog, names) {
  'use strict';
  const stringify = JSON.stringify;
  const PromiseCtor = Promise;
  const ErrorCtor = Error;
  const MapCtor = Map;
  const StringFn = String;
  const freeze = Object.freeze;
  const define = Object.defineProperty;
  const pending = new MapCtor();
  const mapGet = MapCtor.prototype.get;
  const mapSet = MapCtor.prototype.set;
  const mapDelete = MapCtor.prototype.delete;
  let next = 0;

  const tools = Object.create(null);
  for (const name of names) {
    const call = function (args) {
      return new PromiseCtor(function (resolve, reject) {
        let text;
        try {
          text = stringify(args === undefined ? {} : args);
        } catch (e) {
          reject(e);
          return;
        }
        if (typeof text !== 'string') {
          reject(new ErrorCtor('the arguments of tools.' + name + ' are not JSON'));
          return;
        }
        next += 1;
        const id = next;
        // Where the program made the call: a failed call's error points at this line.
        const site = new ErrorCtor().stack;
        mapSet.call(pending, id, [resolve, reject, name, site]);
        const refused = hostCall(id, name, text);
        if (refused) {
          mapDelete.call(pending, id);
          const e = new ErrorCtor(refused);
          e.toolName = name;
          e.code = 'CODE_CALL_REFUSED';
          reject(e);
        }
      });
    };
    define(tools, name, { value: call, enumerable: true });
  }
  freeze(tools);

  const show = function (v) {
    if (typeof v === 'string') return v;
    try {
      const s = stringify(v);
      return s === undefined ? StringFn(v) : s;
    } catch (e) {
      return StringFn(v);
    }
  };
  const log = function (...args) {
    let line = '';
    for (let i = 0; i < args.length; i++) {
      if (i > 0) line += ' ';
      line += show(args[i]);
    }
    hostLog(line);
  };
  const console = freeze({ log: log, info: log, warn: log, error: log, debug: log });
  define(globalThis, 'tools', { value: tools, enumerable: false });
  define(globalThis, 'console', { value: console, enumerable: false });

  return freeze({
    settle: function (id, ok, text, code) {
      const entry = mapGet.call(pending, id);
      if (entry === undefined) return;
      mapDelete.call(pending, id);
      if (ok) {
        entry[0](text);
      } else {
        const e = new ErrorCtor(text);
        e.toolName = entry[2];
        e.code = code;
        e.stack = entry[3];
        entry[1](e);
      }
    },
    render: function (v) {
      if (v === undefined) return 'null';
      try {
        const s = stringify(v);
        return typeof s === 'string' ? s : stringify(StringFn(v));
      } catch (e) {
        return stringify(StringFn(v));
      }
    },
    describe: function (e) {
      try {
        if (e !== null && typeof e === 'object') {
          return stringify({
            name: StringFn(e.name === undefined ? 'Error' : e.name),
            message: StringFn(e.message === undefined ? show(e) : e.message),
            stack: StringFn(e.stack === undefined ? '' : e.stack),
            toolName: e.toolName === undefined ? null : StringFn(e.toolName),
            code: e.code === undefined ? null : StringFn(e.code),
          });
        }
        return stringify({ name: 'thrown value', message: show(e), stack: '', toolName: null, code: null });
      } catch (_) {
        return '{"name":"Error","message":"a value that cannot be read was thrown","stack":"","toolName":null,"code":null}';
      }
    },
  });
})
