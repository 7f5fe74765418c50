-- A hardened server: hostile control connections (bad cookie, garbage,
-- oversized length prefix, malformed JSON, a client that goes silent) are
-- dropped one by one, without a crash, while a legitimate test on the same
-- server runs to a consistent result; afterwards the server still serves.
-- The hostile peers are bash /dev/tcp scripts, so no extra tool is needed.
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

if not core.traffic_client then
  describe('hostile control connections', function()
    pending('core.traffic_client is not in this build (engine binding not merged yet)')
  end)
  return
end

local GOOD_COOKIE = 'abcdefghijklmnopqrstuvwxyz2345672345'  -- 36 chars of a-z2-7

-- A hostile peer: connect, send `payload` (printf format), keep the socket
-- open and record how long the server took to close it and what it wrote.
local function hostile(port, name, payload)
  local out = H.tmp('hostile-' .. name)
  local script = string.format([[
exec 3<>/dev/tcp/127.0.0.1/%d || { echo connect-failed > %s.status; exit 1; }
t0=$(date +%%s.%%N)
printf '%s' >&3
timeout 15 cat <&3 | od -An -tx1 -v > %s.bytes
rc=${PIPESTATUS[0]}
t1=$(date +%%s.%%N)
echo "$rc $(awk "BEGIN { print $t1 - $t0 }")" > %s.status
]], port, out, payload, out, out)
  local f = assert(io.open(out .. '.sh', 'w'))
  f:write(script)
  f:close()
  return { name = name, out = out, pid = H.spawn('exec bash ' .. out .. '.sh', out .. '.log') }
end

-- Wait for a hostile peer to finish; returns cat's exit status, seconds the
-- server needed to close, and the bytes it sent (hex string).
local function outcome(h)
  assert(H.wait_exit(h.pid, 20), h.name .. ': peer still connected after 20 s')
  local st = H.read(h.out .. '.status') or ''
  local rc, secs = st:match('^(%d+) ([%d%.]+)')
  assert(rc, h.name .. ': no status (' .. st .. ')')
  return tonumber(rc), tonumber(secs), (H.read(h.out .. '.bytes') or ''):gsub('%s+', ' ')
end

describe('hostile control connections', function()
  local srv, port

  setup(function()
    port = H.port()
    local err, code
    srv, err, code = traffic.server { port = port, bind_address = '127.0.0.1',
      idle_timeout_s = 1 }
    assert(srv, tostring(err) .. ' ' .. tostring(code))
  end)

  teardown(function()
    if srv then srv:stop() end
    H.cleanup_tmp()
  end)

  it('are rejected one by one while a good test runs, and the server keeps serving', function()
    local good = assert(traffic.start { host = '127.0.0.1', port = port, duration_s = 2.5,
      interval_s = 0.5, bitrate_bps = 50e6 })
    local peers = {
      hostile(port, 'garbage', 'GET / HTTP/1.0\\r\\n\\r\\n'),
      hostile(port, 'bad-cookie', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\\000'),
      hostile(port, 'short-cookie', 'abc'),
      -- a valid cookie, then a length prefix of 2^31 - 1 bytes
      hostile(port, 'oversized', GOOD_COOKIE .. '\\000\\177\\377\\377\\377'),
      -- a valid cookie, then 12 bytes of "JSON" that is not
      hostile(port, 'bad-json', GOOD_COOKIE .. '\\000\\000\\000\\000\\014{"tcp":tru}}'),
      -- a valid cookie, then JSON that is no object
      hostile(port, 'json-array', GOOD_COOKIE .. '\\000\\000\\000\\000\\002[]'),
      hostile(port, 'silent', ''),
    }
    local res = assert(good:wait())
    H.identities(res, 'test beside hostile peers')
    assert.is_true(res.received.bytes > 0)
    assert(math.abs(res.duration_s - 2.5) < 0.4, 'good test ran ' .. res.duration_s .. ' s')
    for _, h in ipairs(peers) do
      local rc, secs, bytes = outcome(h)
      -- cat ended by EOF (0), not by the 15 s timeout (124): the server hung up.
      assert(rc == 0, string.format('%s: server did not close (cat status %d, %.1f s)', h.name,
        rc, secs))
      -- The silent one and the short cookie go at the idle timeout (1 s), the
      -- others as soon as their input is judged.
      assert(secs < 5, string.format('%s: closed only after %.1f s', h.name, secs))
      if h.name == 'oversized' or h.name == 'bad-json' or h.name == 'json-array' then
        -- the server asked for parameters (PARAM_EXCHANGE = 9) before judging them
        assert.matches('^ ?09', bytes, nil, h.name .. ': ' .. bytes)
      end
    end
    -- Still serving, and nothing of the hostile peers counts as a test.
    local after = assert(traffic.run { host = '127.0.0.1', port = port, duration_s = 0.5,
      bitrate_bps = 50e6 })
    H.identities(after, 'test after hostile peers')
    assert.equal(0, srv:tests_running())
    assert.equal(2, #srv:results())
    -- at least the five that sent something invalid are counted as refused
    assert(srv:rejected() >= 5, 'rejected() = ' .. srv:rejected())
  end)
end)
