-- qoslab.link.impair_link's arguments, checked before any namespace or
-- device is touched (no root needed): a bad spec is named as qoslab.netem
-- names it, with the direction in front; unknown keys, missing or wrongly
-- typed fields, equal namespaces or addresses raise naming the field.
local core = require 'qoslab.core'
local link = require 'qoslab.link'

local function err_of(f, ...)
  local ok, msg = pcall(f, ...)
  assert(not ok, 'expected an error')
  return tostring(msg)
end

local BASE = { a_netns = 'qoslab-nonexistent-a', b_netns = 'qoslab-nonexistent-b',
  a_addr = '10.0.0.1', b_addr = '10.0.0.2' }

local function with(t)
  local o = {}
  for k, v in pairs(BASE) do o[k] = v end
  for k, v in pairs(t) do o[k] = v end
  return o
end

describe('qoslab.link.impair_link arguments', function()
  it('a bad spec raises with qoslab.netem\'s own wording and the direction', function()
    for _, spec in ipairs {
      { delay_ms = -1 }, { loss_pct = 150 }, { jitter_ms = 0 / 0 }, { bogus = 1 },
      { limit_packets = 'auto' }, { reorder_pct = 10 }, { delay_ms = 'x' },
    } do
      local want = err_of(core.netem_normalize, spec, 'CTX'):gsub('^CTX: ', '')
      for _, dir in ipairs { 'forward', 'reverse' } do
        local msg = err_of(link.impair_link, with { [dir] = spec })
        assert.equal('qoslab.link.impair_link: opts.' .. dir .. ': ' .. want, msg:gsub('^[^:]*:%d+: ', ''))
      end
    end
  end)

  it('unknown keys, missing and wrongly typed fields name the field', function()
    assert.matches('qoslab.link.impair_link: opts: expected a table',
      err_of(link.impair_link, nil))
    assert.matches('opts%.bogus', err_of(link.impair_link, with { bogus = 1 }))
    for _, k in ipairs { 'a_netns', 'b_netns', 'a_addr', 'b_addr' } do
      local o = with {}
      o[k] = nil
      assert.matches('qoslab.link.impair_link: opts.' .. k .. ': expected a string, got nil',
        err_of(link.impair_link, o), 1, true)
      o[k] = 5
      assert.matches('opts.' .. k .. ': expected a string', err_of(link.impair_link, o), 1, true)
    end
    assert.matches('opts.mtu_bytes: expected an integer in %[68, 65535%]',
      err_of(link.impair_link, with { mtu_bytes = 67 }))
    assert.matches('opts.memory_bytes', err_of(link.impair_link, with { memory_bytes = 0 }))
    assert.matches('opts.gso: expected a boolean', err_of(link.impair_link, with { gso = 1 }))
    assert.matches('opts.seed', err_of(link.impair_link, with { seed = -1 }))
  end)

  it('rules between fields', function()
    assert.matches('impair_link: opts.b_netns: expected a namespace other than a_netns',
      err_of(link.impair_link, with { b_netns = BASE.a_netns }), 1, true)
    assert.matches('impair_link: opts.b_addr: expected an address other than a_addr',
      err_of(link.impair_link, with { b_addr = BASE.a_addr }), 1, true)
    assert.matches('opts.b_addr: expected an IPv4 address (the point-to-point pair is IPv4: add IPv6 '
      .. 'addresses to the devices with qoslab.link.addr_add), got "fd00::2"',
      err_of(link.impair_link, with { b_addr = 'fd00::2' }), 1, true)
    assert.matches('opts.a_addr: expected an IPv4 address without prefix, got "10.0.0.1/24"',
      err_of(link.impair_link, with { a_addr = '10.0.0.1/24' }), 1, true)
    assert.matches('opts.a_ifname', err_of(link.impair_link, with { a_ifname = 'a/b' }), 1, true)
    assert.matches('opts.a_netns', err_of(link.impair_link, with { a_netns = 'x/y' }), 1, true)
  end)

  it('every argument error is raised at the caller\'s line, each field as opts.<field>', function()
    local here = debug.getinfo(1, 'S').short_src
    for _, o in ipairs {
      with { memory_bytes = 0 }, with { mtu_bytes = 10 }, with { b_netns = BASE.a_netns },
      with { b_addr = BASE.a_addr }, with { a_ifname = 'a/b' }, with { forward = { delay_ms = -1 } },
      with { bogus = 1 },
    } do
      local line = debug.getinfo(1, 'l').currentline + 1
      local msg = err_of(function() link.impair_link(o) end)
      assert.equal(here .. ':' .. line .. ': qoslab.link.impair_link: opts.', msg:sub(1, #here + #tostring(line) + 33))
    end
  end)
end)
