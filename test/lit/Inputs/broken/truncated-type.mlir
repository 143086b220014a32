// Cut off in the middle of a type.
func.func @f(%x: tensor<4x