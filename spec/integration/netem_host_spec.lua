-- qoslab.netem on a kernel WITHOUT sch_netem (this host), as root, in a
-- namespace the test creates: the failures must be the documented ones, and
-- nothing (ifb, ingress qdisc, filter, state record) may be left behind.
local netem = require 'qoslab.netem'

local function pid()
  local f = assert(io.open('/proc/self/stat'))
  local p = f:read('l'):match('^(%d+)')
  f:close()
  return p
end

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok = p:close()
  return out, ok
end

describe('qoslab.netem on a host without sch_netem #integration', function()
  local ns = 'qlnh' .. pid()
  local state_dir = os.tmpname()

  setup(function()
    os.remove(state_dir)
    assert(os.execute('mkdir -p ' .. state_dir))
    -- Recorded objects go to a private directory so the check below is exact.
    require('qoslab.state').dir = function() return state_dir end
    assert(os.execute('ip netns add ' .. ns))
    assert(os.execute('ip -n ' .. ns .. ' link add va type veth peer name vb'))
    assert(os.execute('ip -n ' .. ns .. ' link set va up && ip -n ' .. ns .. ' link set vb up'))
  end)

  teardown(function()
    os.execute('ip netns del ' .. ns .. ' 2>/dev/null')
    os.execute('rm -rf ' .. state_dir)
  end)

  local function leftovers()
    local links = sh('ip -n ' .. ns .. ' -o link show')
    local qd = sh('tc -n ' .. ns .. ' qdisc show dev va')
    local files = sh('ls ' .. state_dir)
    return links:match('qlifb') ~= nil, qd:match('ingress') ~= nil, files
  end

  it('apply answers ENOTSUP with the modprobe advice', function()
    local r, msg, code = netem.apply('va', { delay_ms = 10 }, { netns = ns, quiet = true })
    if r then pending('this kernel has sch_netem; the guest specs cover it') return end
    assert.is_nil(r)
    assert.equal('ENOTSUP', code)
    assert.matches('kernel has no sch_netem: load it with modprobe sch_netem', msg, 1, true)
    assert.matches('`qoslab run FILE --guest` (a qemu guest with real netem)', msg, 1, true)
    local ifb, ingress, files = leftovers()
    assert.is_false(ifb)
    assert.is_false(ingress)
    assert.equal('', files)
  end)

  it('a missing device is ENODEV naming the device and the namespace', function()
    local r, msg, code = netem.apply('nosuch0', { delay_ms = 10 }, { netns = ns })
    assert.is_nil(r)
    assert.equal('ENODEV', code)
    assert.matches('"nosuch0"', msg, 1, true)
    assert.matches(ns, msg, 1, true)
    local s, m2, c2 = netem.get('nosuch0', { netns = ns })
    assert.is_nil(s)
    assert.equal('ENODEV', c2)
    assert.is_string(m2)
    assert.equal('ENODEV', select(3, netem.clear('nosuch0', { netns = ns })))
    assert.equal('ENODEV', select(3, netem.stats('nosuch0', { netns = ns })))
    assert.equal('ENODEV', select(3, netem.apply('nosuch0', {}, { netns = ns, direction = 'ingress' })))
  end)

  it('without CAP_NET_ADMIN apply is EPERM and says so', function()
    local lua = 'package.cpath = "./' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;" .. package.cpath ' ..
      'package.path = "./lua/?.lua;" .. package.path ' ..
      'print(select(3, require("qoslab.netem").apply("lo", {delay_ms = 1}, {quiet = true})), ' ..
      'select(2, require("qoslab.netem").apply("lo", {delay_ms = 1}, {quiet = true})))'
    local out = sh("setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all lua5.4 -e '" .. lua .. "'")
    assert.matches('^EPERM\t', out)
    assert.matches('CAP_NET_ADMIN', out, 1, true)
  end)

  it('a parent class that does not exist is ENOENT naming the class', function()
    local r, msg, code = netem.apply('va', { delay_ms = 10 }, { netns = ns, parent = '1:1', quiet = true })
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.equal('no class 1:1 on va in netns ' .. ns .. ': opts.parent must name an existing class '
      .. "(e.g. a testbed shaper's netem_parent; see `tc class show dev va`)", msg)
  end)

  it('a missing namespace is ENOENT', function()
    local r, msg, code = netem.apply('va', { delay_ms = 10 }, { netns = ns .. 'x' })
    assert.is_nil(r)
    assert.equal('ENOENT', code)
    assert.matches('network namespace "' .. ns .. 'x" does not exist', msg, 1, true)
    assert.equal('ENOENT', select(3, netem.get('va', { netns = ns .. 'x' })))
  end)

  it('without a netem: get and stats return nil alone, clear returns false', function()
    local s, m = netem.get('va', { netns = ns })
    assert.is_nil(s)
    assert.is_nil(m)
    assert.is_nil(netem.stats('va', { netns = ns }))
    assert.is_false(netem.clear('va', { netns = ns }))
    assert.is_nil(netem.get('va', { netns = ns, direction = 'ingress' }))
    assert.is_false(netem.clear('va', { netns = ns, direction = 'ingress' }))
  end)

  it('ingress: a failed netem removes the ifb, ingress qdisc and filter it made', function()
    for _, src in ipairs { false, '10.9.0.2', 'fd00::2/64' } do
      local r, _, code = netem.apply('va', { delay_ms = 100 },
        { netns = ns, direction = 'ingress', ingress_src = src or nil, quiet = true })
      if r then
        netem.clear('va', { netns = ns, direction = 'ingress' })
        pending('this kernel has sch_netem; the guest specs cover it')
        return
      end
      assert.equal('ENOTSUP', code)
      local ifb, ingress, files = leftovers()
      assert.is_false(ifb)
      assert.is_false(ingress)
      assert.equal('', files)
    end
    assert.has_error(function()
      netem.apply('va', { delay_ms = 1 }, { netns = ns, direction = 'ingress', ingress_src = '10.0.0.300' })
    end, nil)
  end)

  it('scope fails like apply and leaves nothing', function()
    local g, msg, code = netem.scope('va', { delay_ms = 10 }, { netns = ns })
    if g then g:restore() pending('this kernel has sch_netem') return end
    assert.equal('ENOTSUP', code)
    assert.is_string(msg)
    local _, _, files = leftovers()
    assert.equal('', files)
  end)

  it('the limit rule uses the veth link speed (10 Gbit/s) without a rate', function()
    local need, bps, source = netem.needed_limit('va', { delay_ms = 100 }, { netns = ns })
    assert.equal('link speed', source)
    assert.equal(10e9, bps)
    assert.equal(math.ceil(10e9 / 8 * 0.1 / 1514 * 1.5), need)
    need, bps, source = netem.needed_limit('va', { delay_ms = 250, rate_bps = 1e9 }, { netns = ns })
    assert.equal('spec.rate_bps', source)
    assert.equal(1e9, bps)
    assert.equal(math.ceil(1e9 / 8 * 0.25 / 1514 * 1.5), need)
    assert.equal(0, (netem.needed_limit('va', {}, { netns = ns })))
  end)

  it('under a shaper the limit rule uses the shaper rate (htb: its ceil)', function()
    local shape = require 'qoslab.shape'
    assert(shape.apply('va', { kind = 'tbf', rate_bps = 100000000 }, { netns = ns }))
    finally(function() shape.clear('va', { netns = ns }) end)
    local need, bps, source = netem.needed_limit('va', { delay_ms = 100 }, { netns = ns, parent = '1:1' })
    assert.equal('shaper rate', source)
    assert.equal(100000000, bps)
    assert.equal(math.ceil(100e6 / 8 * 0.1 / 1514 * 1.5), need)
    -- at the root netem would replace the shaper: the link speed counts
    assert.equal('link speed', select(3, netem.needed_limit('va', { delay_ms = 100 }, { netns = ns })))
    assert(shape.apply('va', { kind = 'htb', rate_bps = 50000000, ceil_bps = 200000000 }, { netns = ns }))
    need, bps, source = netem.needed_limit('va', { delay_ms = 100 }, { netns = ns, parent = '1:10' })
    assert.equal('shaper rate', source)
    assert.equal(200000000, bps)
    assert.equal(math.ceil(200e6 / 8 * 0.1 / 1514 * 1.5), need)
  end)
end)
