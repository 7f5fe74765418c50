-- 026: a control connection whose 4-byte parameter length was 0 was logged
-- as "oversized message during reading parameters". It is still refused
-- (SERVER_ERROR, counted as rejected), but the log now says what came: an
-- empty message; a length above the limit is still "oversized".
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

local COOKIE = 'abcdefghijklmnopqrstuvwxyz2345672345\\000'

local function stray(port, payload)
  return H.sh(string.format(
    "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && printf %s >&3 && timeout 5 cat <&3 >/dev/null'",
    port, H.q(payload):gsub("'", "'\\''")))
end

-- The reason of problem n, waiting at most 3 s for it.
local function reason(srv, n)
  local t0 = H.now()
  repeat
    local _, _, _, log = srv:problems()
    if #log >= n then return log[n].reason end
    H.sleep(0.02)
  until H.now() - t0 > 3
end

describe('regress 026 an empty parameter message', function()
  it('is refused and logged as empty, an oversized one as oversized', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port, bind_address = '127.0.0.1', idle_timeout_s = 1 })
    finally(function() srv:stop() end)
    stray(port, COOKIE .. '\\000\\000\\000\\000')
    local r = reason(srv, 1)
    assert(r, 'no problem logged')
    assert.matches('empty message %(length 0%) during reading parameters', r)
    assert.is_nil(r:find('oversized'), r)
    stray(port, COOKIE .. '\\177\\377\\377\\377')
    assert.matches('oversized message during reading parameters', reason(srv, 2) or '')
    assert.equal(2, srv:rejected())
  end)
end)
