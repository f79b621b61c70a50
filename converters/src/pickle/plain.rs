//! The plain value a pickle's objects make: shared objects copied, within the
//! memory bound, nesting bounded.

use super::machine::{Item, Machine, Node};
use super::{PickleError, Value};

impl Machine<'_> {
    /// The plain tree of `item`, copying shared objects within the budget.
    pub(super) fn plain(
        &self,
        item: &Item,
        depth: usize,
        max_depth: usize,
        budget: &mut usize,
    ) -> Result<Value, PickleError> {
        let over = |this: &Self| {
            this.fail(
                "the objects built would exceed the memory bound (shared objects copied too often)",
            )
        };
        let mut charge = |n: usize, this: &Self| -> Result<(), PickleError> {
            *budget = match budget.checked_sub(n.saturating_add(16)) {
                Some(left) => left,
                None => return over(this),
            };
            Ok(())
        };
        match item {
            Item::Scalar(value) => {
                let len = match value {
                    Value::Str(s) => s.len(),
                    Value::Bytes(b) => b.len(),
                    _ => 0,
                };
                charge(len, self)?;
                Ok(value.clone())
            }
            Item::InputBytes(start, len) => {
                charge(*len, self)?;
                Ok(Value::Bytes(self.input[*start..*start + len].to_vec()))
            }
            Item::CodecsEncode => self.fail("_codecs.encode left uncalled"),
            Item::Node(n) => {
                if depth >= max_depth {
                    return self.fail(format!(
                        "containers nested deeper than {max_depth} levels (or holding themselves)"
                    ));
                }
                charge(0, self)?;
                let items =
                    |list: &[Item], budget: &mut usize| -> Result<Vec<Value>, PickleError> {
                        list.iter()
                            .map(|i| self.plain(i, depth + 1, max_depth, budget))
                            .collect()
                    };
                Ok(match &self.nodes[*n] {
                    Node::List(list) => Value::List(items(list, budget)?),
                    Node::Tuple(list) => Value::Tuple(items(list, budget)?),
                    Node::Dict(pairs) => {
                        let mut out: Vec<(Value, Value)> = Vec::with_capacity(pairs.len());
                        for (k, v) in pairs {
                            let key = self.plain(k, depth + 1, max_depth, budget)?;
                            let value = self.plain(v, depth + 1, max_depth, budget)?;
                            match out.iter_mut().find(|(existing, _)| *existing == key) {
                                Some(slot) => slot.1 = value,
                                None => out.push((key, value)),
                            }
                        }
                        Value::Dict(out)
                    }
                })
            }
        }
    }
}
