-- Busted output handler: the usual terminal output, plus the counts of this
-- run written to $QOSLAB_COUNTS as "passed failed skipped" so that
-- spec/support/test-all.sh can sum every suite into one line.
return function(options)
  local busted = require 'busted'
  local handler = require 'busted.outputHandlers.utfTerminal'(options)
  local function write_counts()
    local path = os.getenv('QOSLAB_COUNTS')
    if not path then return nil, true end
    local f = assert(io.open(path, 'w'))
    f:write(string.format('%d %d %d\n', handler.successesCount,
      handler.failuresCount + handler.errorsCount, handler.pendingsCount))
    f:close()
    return nil, true
  end
  busted.subscribe({ 'suite', 'end' }, write_counts, { priority = 1 })
  return handler
end
