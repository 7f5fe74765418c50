-- 013: CPU figures from the new-user trial. A 1-datagram UDP test printed
-- "cpu server: 460.2%" on a 2-core host and a CPU-limited warning: each
-- thread's CPU time covers its whole life (receivers start before the
-- test's clock, senders wait for acks, receivers drain after it) but was
-- divided by the test's duration. And 64 paced streams each way filled both
-- cores (91 % + 91 %) with no warning, since no single thread was busy, while
-- the senders dropped 13 % of their slots in silence.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local function ncpu()
  local p = io.popen('nproc')
  local n = tonumber(p:read('a'))
  p:close()
  return n
end

-- The dropped and planned counts of a side's dropped-slots warning.
local function w_counts(res, side)
  for _, w in ipairs(res.warnings or {}) do
    local n, of = w:match("^the " .. side .. "'s senders .- dropped (%d+) of (%d+) datagram")
    if n then return tonumber(n), tonumber(of) end
  end
end

describe('regress 013 CPU shares', function()
  local port, srv
  setup(function()
    port = H.port()
    srv = assert(traffic.server { port = port })
  end)
  teardown(function() if srv then srv:stop() end end)

  local function shares_possible(res, label)
    local n = ncpu()
    for _, side in ipairs { 'client', 'server' } do
      local c = res.cpu[side]
      assert(c and c.total_pct, label .. ': no CPU figures of the ' .. side)
      assert(c.total_pct <= 100 * n + 1, string.format('%s: %s %.1f %% of %d CPUs', label, side,
        c.total_pct, n))
      assert(c.busiest_thread_pct <= 100, label .. ': busiest thread above 100 %')
    end
  end

  it('a 1-datagram UDP test uses no more than the host has', function()
    local res = assert(traffic.run { host = '127.0.0.1', port = port, proto = 'udp', packets = 1 })
    H.identities(res, 'one datagram')
    assert.equal(1, res.sent.packets)
    shares_possible(res, 'one datagram')
  end)

  it('cpu_limited holds exactly when a thread or the shared host was busy', function()
    -- 64 streams each way at 20 Mbit/s: on a 2-core host both ends fill
    -- both cores; on a larger one they may not. Either way the flag must
    -- follow the figures, and dropped slots must be said.
    local res = assert(traffic.run { host = '127.0.0.1', port = port, proto = 'udp',
      parallel = 64, bidir = true, bitrate_bps = 20e6, duration_s = 2 })
    shares_possible(res, 'overload')
    local c, s, n = res.cpu.client, res.cpu.server, ncpu()
    local busy = c.busiest_thread_pct >= 90 or s.busiest_thread_pct >= 90
      or c.total_pct + s.total_pct >= 90 * n
    assert.equal(busy, res.cpu_limited, string.format(
      'client %.0f %% (thread %.0f), server %.0f %% (thread %.0f) of %d CPUs', c.total_pct,
      c.busiest_thread_pct, s.total_pct, s.busiest_thread_pct, n))
    -- a sender short of its schedule says so
    local slots = math.ceil(20e6 * 2 / (8 * 1460))
    -- a side short of its schedule says by how much, exactly
    for _, d in ipairs { { res.sent, 'client' }, { res.reverse_sent, 'server' } } do
      local missing = 64 * slots - d[1].packets
      assert(missing >= 0, d[2] .. ' sent more than its schedule')
      local said
      for _, w in ipairs(res.warnings or {}) do
        said = said or w:match("^the " .. d[2] .. "'s senders .- dropped (%d+) of (%d+) datagram")
      end
      if missing > 0 then
        assert(said, d[2] .. ': ' .. missing .. ' slots short without a warning')
        local dropped, of = w_counts(res, d[2])
        assert.equal(missing, dropped)
        assert.equal(64 * slots, of)
      else
        assert(not said, d[2] .. ': a warning of dropped slots with none missing')
      end
    end
  end)
end)
