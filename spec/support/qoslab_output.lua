-- Busted output handler: the usual terminal output, plus the counts of this
-- run written to $QOSLAB_COUNTS as "passed failed skipped" so that
-- spec/support/test-all.sh can sum every suite into one line.
-- Under the TSan host (spec/support/san-lua.c) every ThreadSanitizer report
-- is a failure too, charged to the test that was running when it appeared.
return function(options)
  local busted = require 'busted'
  local handler = require 'busted.outputHandlers.utfTerminal'(options)
  local have_san, san = pcall(require, 'san_host')
  local tsan = have_san and san.tsan
  local raced, seen = 0, 0

  local function charge(name)
    local now = san.reports()
    if now > seen then
      raced = raced + 1
      io.stderr:write(string.format('\nThreadSanitizer: %d report(s) during %s\n',
        now - seen, name))
      seen = now
    end
    return nil, true
  end

  local function write_counts()
    if tsan then charge('the suite, outside any test') end
    local path = os.getenv('QOSLAB_COUNTS')
    if not path then return nil, true end
    local f = assert(io.open(path, 'w'))
    f:write(string.format('%d %d %d\n', handler.successesCount,
      handler.failuresCount + handler.errorsCount + raced, handler.pendingsCount))
    f:close()
    return nil, true
  end
  if tsan then
    busted.subscribe({ 'test', 'start' }, function() return charge('setup before a test') end)
    busted.subscribe({ 'test', 'end' }, function(element)
      return charge(handler.getFullName(element))
    end)
  end
  busted.subscribe({ 'suite', 'end' }, write_counts, { priority = 1 })
  return handler
end
