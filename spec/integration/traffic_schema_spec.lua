-- qoslab.traffic.to_iperf3_json against the JSON the installed iperf3 -J
-- prints: for each kind of test (TCP -P 2, -R, --bidir; UDP, UDP -R) the
-- converter's output of a result of that kind has the same keys, at every
-- level, as iperf3's own client output (less the few facts qoslab does not
-- measure, listed in the helper). Needs no engine: iperf3 runs against
-- itself on loopback and the qoslab side is a synthetic result.
local traffic = require 'qoslab.traffic'
local cjson = require 'cjson'
local H = require 'integration.traffic_helper'

local have_iperf3 = H.sh('iperf3 --version')

local describe_if = have_iperf3 and describe or function(name)
  describe(name, function() pending('iperf3 is not installed') end)
end

describe_if('to_iperf3_json has the schema of iperf3 -J', function()
  teardown(function() H.cleanup_tmp() end)

  local function iperf3_json(flags)
    local port = H.port()
    local pid = H.spawn(string.format('exec iperf3 -s -1 -p %d', port))
    local ok, text = pcall(function()
      assert(H.wait_listen(port, nil, 5), 'iperf3 -s did not listen')
      local good, out = H.sh(string.format('timeout 20 iperf3 -c 127.0.0.1 -p %d -J %s', port,
        flags))
      assert(good, out)
      return out
    end)
    H.kill(pid)
    assert(ok, text)
    return cjson.decode(text)
  end

  for _, c in ipairs {
    { '-t 1 -P 2 -b 100M', { parallel = 2 }, 'TCP -P 2' },
    { '-t 1 -R -b 100M', { reverse = true }, 'TCP -R' },
    { '-t 1 --bidir -b 100M', { bidir = true }, 'TCP --bidir' },
    { '-u -t 1 -b 1M', { proto = 'udp' }, 'UDP' },
    { '-u -t 1 -b 1M -R', { proto = 'udp', reverse = true }, 'UDP -R' },
  } do
    it(c[3], function()
      local ref = iperf3_json(c[1])
      local ours = traffic.to_iperf3_json(H.fixture(c[2]))
      H.schema_matches(ref, ours, c[3])
      -- values of the same kind (numbers stay numbers, booleans booleans)
      assert.equal(type(ref.start.test_start.reverse), type(ours.start.test_start.reverse))
      assert.equal(ref.start.test_start.protocol, ours.start.test_start.protocol)
      assert.equal(ref.start.test_start.reverse, ours.start.test_start.reverse)
      assert.equal(ref.intervals[1].sum.sender, ours.intervals[1].sum.sender)
    end)
  end
end)
