-- Client input that only a running kernel can judge, checked before a test
-- starts. A congestion control the kernel lacks used to be found out only
-- by a data socket's setsockopt(TCP_CONGESTION), after the client had
-- connected and sent its parameters: the client got ENOENT and the server
-- logged a rejected control connection. Now the client fails with
-- "ENOTSUP" (the message lists the available ones) and the server sees
-- nothing; an available one is used by both ends. In a namespace the same
-- holds (the kernel's list is shared by all namespaces). NUL bytes and
-- netns = '' are refused before any namespace is entered.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('client input checked before the test', function()
    pending('core.traffic_client is not in this build (engine binding not merged yet)')
  end)
  return
end

local function available()
  local f = io.open('/proc/sys/net/ipv4/tcp_available_congestion_control')
  local s = f and f:read('l') or ''
  if f then f:close() end
  local t = {}
  for w in s:gmatch('%S+') do t[#t + 1] = w end
  return t, s
end

describe('client input checked before the test', function()
  it('a missing congestion control never reaches the server; an available one is used', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port, bind_address = '127.0.0.1' })
    local ok, err = pcall(function()
      local list, text = available()
      local res, msg, code = traffic.run { host = '127.0.0.1', port = port, duration_s = 1,
        congestion = 'nosuchcc' }
      assert.is_nil(res)
      assert.equal('ENOTSUP', code)
      assert.equal('opts.congestion: this kernel has no congestion control "nosuchcc" (available: '
        .. text .. '); load its module (modprobe tcp_nosuchcc) or pick an available one', msg)
      H.sleep(0.2)
      assert.equal(0, srv:rejected())
      assert.equal(0, srv:started())
      assert.equal(0, (srv:problems()))
      -- every name the kernel lists is accepted, and the kernel runs the
      -- client's sockets with it (ss -i names each socket's algorithm)
      assert(#list >= 1, 'no congestion control listed')
      for _, name in ipairs(list) do
        local h = assert(traffic.start { host = '127.0.0.1', port = port, duration_s = 0.6,
          bitrate_bps = 10000000, congestion = name })
        H.sleep(0.3)
        local _, ss = H.sh("ss -Htin 'dport = :" .. port .. "'")
        local r = assert(h:wait())
        -- the data socket is the one that sent the most (the control
        -- connection keeps the namespace's default algorithm)
        local ca, most = nil, -1
        for c, sent in ss:gmatch('\n%s+(%w+) [^\n]-bytes_sent:(%d+)') do
          if tonumber(sent) > most then ca, most = c, tonumber(sent) end
        end
        assert(most > 100000, 'ss shows no data socket: ' .. ss)
        assert.equal(name, ca)
        assert(r.sent.bytes > 0)
        assert.equal(name, r.options.congestion)
      end
      assert.equal(#list, srv:started())
      assert.equal(0, srv:rejected())
    end)
    srv:stop()
    assert(ok, err)
  end)

  it('in a namespace: the same check, and NUL or "" netns refused before entering', function()
    local pair <close> = H.netns_pair()
    local port = H.port()
    local srv = assert(traffic.server { port = port, netns = pair.b })
    local ok, err = pcall(function()
      local res, msg, code = traffic.run { host = pair.b_addr, port = port, netns = pair.a,
        duration_s = 1, congestion = 'nosuchcc' }
      assert.is_nil(res, msg)
      assert.equal('ENOTSUP', code)
      local r = assert(traffic.run { host = pair.b_addr, port = port, netns = pair.a,
        bytes = 131072, congestion = 'reno' })
      assert.equal(131072, r.received.bytes)
      -- "a\0..." would have run in namespace pair.a
      local ok2, e2 = pcall(traffic.run, { host = pair.b_addr, port = port,
        netns = pair.a .. '\0x', bytes = 131072 })
      assert.is_false(ok2)
      assert.matches('opts.netns: expected a string without NUL bytes', e2, 1, true)
      local ok3, e3 = pcall(traffic.server, { port = H.port(), netns = pair.b .. '\0' })
      assert.is_false(ok3)
      assert.matches('qoslab.server: opts.netns: expected a string without NUL bytes', e3, 1, true)
      local ok4, e4 = pcall(traffic.run, { host = pair.b_addr, port = port, netns = '',
        bytes = 131072 })
      assert.is_false(ok4)
      assert.matches('opts.netns: expected a namespace name', e4, 1, true)
      assert.equal(1, srv:started())
    end)
    srv:stop()
    assert(ok, err)
  end)
end)
