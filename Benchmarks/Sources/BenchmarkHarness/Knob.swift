import Foundation

/// The benchmark knob `name` read from the environment (`SYNC_FLOOR_ITEMS=1000`), or `value` when
/// the variable is unset or does not parse as a `Value`.
public func knob<Value: LosslessStringConvertible>(_ name: String, default value: Value) -> Value {
    ProcessInfo.processInfo.environment[name].flatMap(Value.init) ?? value
}
