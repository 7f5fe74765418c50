-- bin/qoslab netem show|set|clear|stats DEV: argument handling, output and
-- exit codes, with a fake qoslab.netem (the real one is exercised by
-- spec/netem/ inside the guest and spec/integration/netem_host_spec.lua).
describe('qoslab netem (in-process, with a fake qoslab.netem)', function()
  local real_parse = require('qoslab.netem').parse
  local fake
  fake = {
    parse = function(str)
      if str:match('banana') then return real_parse(str) end
      if str:match('bogus') then error('qoslab.netem.parse: unknown option "bogus"', 0) end
      return { delay_ms = 50, loss_pct = 1 }
    end,
    format = function(spec) return 'delay ' .. spec.delay_ms .. 'ms loss ' .. spec.loss_pct .. '%' end,
    apply = function(dev, spec, o)
      if dev == 'nodev' then return nil, 'no such device nodev', 'ENODEV' end
      fake.applied = { dev = dev, spec = spec, opts = o }
      return { warnings = { 'limit 1000 packets is below rate x delay' }, spec = spec }
    end,
    get = function(dev) if dev == 'empty' then return nil end return { delay_ms = 50, loss_pct = 1 } end,
    stats = function() return { packets = 10, bytes = 15140, drops = 1, overlimits = 0, requeues = 0, backlog_packets = 0, backlog_bytes = 0 } end,
    clear = function(dev, o) fake.cleared = { dev = dev, opts = o } return dev ~= 'empty' end,
  }

  local function netem(argv)
    local argparse = require 'argparse'
    local cp = require 'qoslab.cli.netem'
    local parser = argparse('qoslab')
    cp.commands.netem.describe(parser:command('netem'))
    local ok, a = parser:pparse({ 'netem', table.unpack(argv) })
    if not ok then return 2, '', a end
    local out, err = {}, {}
    local old_print, old_stderr, old_netem = print, io.stderr, package.loaded['qoslab.netem']
    package.loaded['qoslab.netem'] = fake
    _G.print = function(...)
      local t = table.pack(...)
      for k = 1, t.n do t[k] = tostring(t[k]) end
      out[#out + 1] = table.concat(t, '\t', 1, t.n) .. '\n'
    end
    io.stderr = { write = function(self, ...) for _, x in ipairs { ... } do err[#err + 1] = x end return self end,
                  flush = function() end }
    local okr, rc = pcall(cp.commands.netem.run, a)
    _G.print, io.stderr, package.loaded['qoslab.netem'] = old_print, old_stderr, old_netem
    assert(okr, rc)
    return rc, table.concat(out), table.concat(err)
  end

  it('set parses tc-netem syntax, applies it and prints what the kernel has', function()
    local rc, out, err = netem { 'set', 'veth0', 'delay', '50ms', 'loss', '1%', '--netns', 'lab' }
    assert.equal(0, rc, err)
    assert.equal('veth0: netem delay 50ms loss 1%\n', out)
    assert.equal('warning: limit 1000 packets is below rate x delay\n', err)
    assert.same({ dev = 'veth0', spec = { delay_ms = 50, loss_pct = 1 }, opts = { netns = 'lab', quiet = true } }, fake.applied)
  end)

  it('set --spec-json: the Lua spec from JSON (integers as integers), JSON out', function()
    local rc, out, err = netem { 'set', 'veth0', '--spec-json',
      '{"delay_ms": 50, "loss_pct": 1.5, "slot": {"min_delay_ms": 2}}', '--json' }
    assert.equal(0, rc, err)
    assert.same({ delay_ms = 50, loss_pct = 1.5, slot = { min_delay_ms = 2 } }, fake.applied.spec)
    assert.equal('integer', math.type(fake.applied.spec.delay_ms))
    local doc = require('cjson').decode(out)
    assert.is_true(doc.ok)
    assert.equal('veth0', doc.dev)
    assert.same({ 'limit 1000 packets is below rate x delay' }, doc.warnings)
    rc, out = netem { 'clear', 'veth0', '--json' }
    assert.equal(0, rc)
    assert.same({ ok = true, dev = 'veth0', removed = true }, require('cjson').decode(out))
    rc, out = netem { 'clear', 'empty', '--json' }
    assert.equal(0, rc)
    assert.same({ ok = true, dev = 'empty', removed = false }, require('cjson').decode(out))
  end)

  it('set --spec-json refuses what is no spec object, naming the option', function()
    for _, c in ipairs {
      { '[1, 2]', '--spec-json: expected a JSON object, got [1,2]\n' },
      { '"delay"', '--spec-json: expected a JSON object, got "delay"\n' },
      { '{"delay_ms": null}', '--spec-json: spec.delay_ms: null: leave the key out instead\n' },
    } do
      local rc, out, err = netem { 'set', 'veth0', '--spec-json', c[1] }
      assert.equal(2, rc)
      assert.equal('', out)
      assert.equal(c[2], err)
    end
    local rc, _, err = netem { 'set', 'veth0', '--spec-json', 'nope' }
    assert.equal(2, rc)
    assert.matches('^%-%-spec%-json: expected a JSON object, e.g. \'{"delay_ms": 50}\', got "nope"', err)
    rc, _, err = netem { 'set', 'veth0', 'delay', '5ms', '--spec-json', '{}' }
    assert.equal(2, rc)
    assert.matches('not both', err, 1, true)
    rc, _, err = netem { 'show', 'veth0', '--spec-json', '{}' }
    assert.equal(2, rc)
    assert.equal('qoslab netem show: --spec-json is for set\n', err)
  end)

  it('show prints the netem or says there is none; clear removes', function()
    local rc, out = netem { 'show', 'empty' }
    assert.equal(0, rc)
    assert.equal('empty: no netem\n', out)
    rc, out = netem { 'show', 'veth0' }
    assert.equal(0, rc)
    assert.equal('veth0: netem delay 50ms loss 1%\n', out)
    rc, out = netem { 'clear', 'veth0', '--netns', 'ns1' }
    assert.equal(0, rc)
    assert.equal('veth0: netem removed\n', out)
    assert.same({ dev = 'veth0', opts = { netns = 'ns1' } }, fake.cleared)
    rc, out = netem { 'clear', 'empty' }
    assert.equal(0, rc)
    assert.equal('no netem on empty\n', out)
  end)

  it('a failure of the world: message and code, exit 1; bad input: exit 2', function()
    local rc, _, err = netem { 'set', 'nodev', 'delay', '50ms' }
    assert.equal(1, rc)
    assert.equal('qoslab netem set nodev: no such device nodev (ENODEV)\n', err)
    rc, _, err = netem { 'set', 'veth0', 'bogus', '1' }
    assert.equal(2, rc)
    assert.equal('qoslab.netem.parse: unknown option "bogus"\n', err)
    rc, _, err = netem { 'set', 'veth0' }
    assert.equal(2, rc)
    assert.matches('needs tc-netem options', err, 1, true)
    rc, _, err = netem { 'show', 'veth0', 'delay', '5ms' }
    assert.equal(2, rc)
    assert.matches('takes no tc-netem options', err, 1, true)
    rc, _, err = netem { 'frob', 'veth0' }
    assert.equal(2, rc)
    assert.matches("argument 'action' must be one of", err, 1, true)
  end)

  -- netem.parse raises at its caller's line, which for the command line was
  -- "./lua/qoslab/cli/netem.lua:42: " before the message: no such prefix.
  it("a parse error is printed without a position inside qoslab's files", function()
    local rc, _, err = netem { 'set', 'lo', 'delay', 'banana' }
    assert.equal(2, rc)
    assert.equal('qoslab.netem.parse: delay: expected a time with a unit (e.g. 50ms, 1.5ms, 250us, 1s), '
      .. 'got "banana"\n', err)
  end)

  it('stats prints the qdisc counters', function()
    local rc, out = netem { 'stats', 'veth0' }
    assert.equal(0, rc)
    assert.matches('packets%s+10\n', out)
    assert.matches('drops%s+1\n', out)
  end)
end)

-- `qoslab netem check SPEC`: netem.check's canonical spec and advice from the
-- command line, with no device and no sch_netem (this host has none), so
-- the advice a spec gets can be read before it is set anywhere.
describe('qoslab netem check (bin/qoslab)', function()
  local function qoslab(args)
    local errfile = os.tmpname()
    local p = assert(io.popen('QOSLAB_BUILD=${QOSLAB_BUILD:-build} lua5.4 bin/qoslab ' .. args
      .. ' 2>' .. errfile .. '; echo "rc=$?"'))
    local out = p:read('a')
    p:close()
    local f = io.open(errfile)
    local err = f and f:read('a') or ''
    if f then f:close() end
    os.remove(errfile)
    return out, err
  end

  it('prints the canonical spec and its advice as warnings, exit 0', function()
    local out, err = qoslab('netem check loss 5% 25%')
    assert.equal('netem limit 1000 loss 5% 25%\nrc=0\n', out)
    assert.matches('^warning: spec.loss_pct = 5 with spec.loss_corr_pct = 25 gives about 0.19 %% loss', err)
    out, err = qoslab('netem check delay 50ms 10ms limit auto')
    assert.equal('netem delay 50ms 10ms limit auto\nrc=0\n', out)
    assert.matches('^warning: spec.jitter_ms = 10 without spec.keep_order or spec.rate_bps reorders', err)
    assert.matches('\n  (on the command line: give a rate at the link\'s speed, e.g. rate 10gbit, which is '
      .. 'what keep_order sets; keep_order itself is a field of Lua specs)\n', err, 1, true)
    out, err = qoslab('netem check delay 50ms rate 100mbit')
    assert.equal('netem limit 1000 delay 50ms rate 100mbit\nrc=0\n', out)
    assert.equal('', err)
  end)

  it('--json: the spec and the advice with its stable code', function()
    local out = qoslab('netem check loss 5% 25% --json')
    local j = require('cjson').decode(out:match('^(.-)\nrc=0\n$'))
    assert.same({ limit_packets = 1000, loss_pct = 5, loss_corr_pct = 25 }, j.spec)
    assert.equal('CORRELATED_LOSS', j.advice[1].code)
  end)

  it('bad input: the message without a position, exit 2', function()
    local out, err = qoslab('netem check delay banana')
    assert.equal('rc=2\n', out)
    assert.equal('qoslab.netem.parse: delay: expected a time with a unit (e.g. 50ms, 1.5ms, 250us, 1s), '
      .. 'got "banana"\n', err)
    out, err = qoslab('netem check loss 150%')
    assert.equal('rc=2\n', out)
    assert.matches('^qoslab.netem.parse: loss: expected a percentage', err)
  end)

  -- `netem check --spec-json '{"delay_ms":5}'` failed with "missing
  -- argument 'dev'": the device was a required argument of every action.
  it('--spec-json: the spec as JSON, no device; the other actions still need one', function()
    local out, err = qoslab([[netem check --spec-json '{"delay_ms":5}']])
    assert.equal('netem limit 1000 delay 5ms\nrc=0\n', out)
    assert.equal('', err)
    out = qoslab([[netem check --spec-json '{"loss_pct":5,"loss_corr_pct":25}' --json]])
    local j = require('cjson').decode(out:match('^(.-)\nrc=0\n$'))
    assert.same({ limit_packets = 1000, loss_pct = 5, loss_corr_pct = 25 }, j.spec)
    assert.equal('CORRELATED_LOSS', j.advice[1].code)
    out, err = qoslab([[netem check --spec-json '{"delay_ms":-5}']])
    assert.equal('rc=2\n', out)
    assert.equal('qoslab netem check: spec.delay_ms: expected a finite number in [0, 1000000000], '
      .. 'got -5\n', err)
    out, err = qoslab([[netem check delay 5ms --spec-json '{}']])
    assert.equal('rc=2\n', out)
    assert.matches('--spec-json or tc-netem options, not both', err, 1, true)
    out, err = qoslab('netem check')
    assert.equal('rc=2\n', out)
    assert.matches('needs tc-netem options', err, 1, true)
    out, err = qoslab([[netem set --spec-json '{"delay_ms":5}']])
    assert.equal('rc=2\n', out)
    assert.equal("Usage: qoslab netem ACTION [DEV] [SPEC...] [options]\nqoslab netem: error: "
      .. "missing argument 'dev'\nsee qoslab netem --help\n", err)
    -- the line written for a missing device is the parser's own usage line
    local cli = require 'qoslab.cli'
    local cmd = require('argparse')('qoslab'):command('netem')
    require('qoslab.cli.netem').commands.netem.describe(cmd)
    assert.equal(require('qoslab.cli.netem').USAGE, cli.usage_line(cmd))
  end)

  it('a device before the spec, as `set` takes it: named, with the command without it', function()
    local out, err = qoslab('netem check lo delay 10ms')
    assert.equal('rc=2\n', out)
    local tail = 'got "lo"\nqoslab netem check: takes the spec alone, no device: drop "lo" '
      .. '(qoslab netem check delay 10ms)\n'
    assert.equal(tail, err:sub(-#tail))
    -- a word that is no device and leaves no spec gets the parser's message alone
    out, err = qoslab('netem check bogus')
    assert.equal('rc=2\n', out)
    assert.is_nil(err:find('no device', 1, true), err)
  end)

  -- A spec word starting with "-" ("delay -5ms") used to be taken by
  -- argparse for an unknown option '-5', so the field was never named.
  it('a negative time reaches the spec parser, which names the field; options still work', function()
    for _, c in ipairs {
      { 'netem set lo delay -5ms', 'delay: expected a time >= 0, got "-5ms"' },
      { 'netem check delay -5ms', 'delay: expected a time >= 0, got "-5ms"' },
      { 'netem set lo --netns nons delay 5ms -1ms --json',
        'delay jitter: expected a time >= 0, got "-1ms"' },
    } do
      local out, err = qoslab(c[1])
      assert.equal('rc=2\n', out, c[1])
      assert.matches(c[2], err, 1, true)
      assert.is_nil(err:find('unknown option', 1, true), err)
    end
    -- an unknown option is still one, with the command's one usage line
    local out, err = qoslab('netem show lo --bogus')
    assert.equal('rc=2\n', out)
    assert.equal("Usage: qoslab netem ACTION [DEV] [SPEC...] [options]\nqoslab netem: error: "
      .. "unknown option '--bogus'\nsee qoslab netem --help\n", err)
  end)

  it('dash_words moves only negative words behind "--", keeping option values in front', function()
    local cli = require 'qoslab.cli'
    local argparse = require 'argparse'
    local cmd = argparse('qoslab'):command('netem')
    require('qoslab.cli.netem').commands.netem.describe(cmd)
    assert.same({ '--netns', 'a', '--json', '--', 'set', 'lo', 'delay', '-5ms' },
      cli.dash_words({ 'set', '--netns', 'a', 'lo', 'delay', '-5ms', '--json' }, cmd))
    assert.same({ '--netns=-1', '--', 'set', 'lo', '-1' },
      cli.dash_words({ 'set', '--netns=-1', 'lo', '-1' }, cmd))
    local same = { 'set', 'lo', 'delay', '5ms', '--json' }
    assert.equal(same, cli.dash_words(same, cmd))
    local dd = { 'set', 'lo', '--', 'delay', '-5ms' }
    assert.equal(dd, cli.dash_words(dd, cmd))
  end)
end)
